"""Distances between pattern sets."""

from __future__ import annotations

from calibrate.contract.hookspecs import RegisterDistance, hookimpl


@hookimpl
def calibrate_register_distances(register: RegisterDistance) -> None:
    from .euclidean import Euclidean
    from .mutual_subspace import MutualSubspace

    register("euclidean", Euclidean)
    register("mutual-subspace", MutualSubspace)
