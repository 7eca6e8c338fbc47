"""Distances between pattern sets.

The hook below registers this room's components; calibrate_builtins/__init__.py gathers the six
hooks into the plugin that the ``calibrate`` entry point names. Modules are imported inside the
hook, so that nothing is imported before the plugins are listed.
"""

from __future__ import annotations

from calibrate.hookspecs import RegisterDistance, hookimpl


@hookimpl
def calibrate_register_distances(register: RegisterDistance) -> None:
    from .euclidean import Euclidean
    from .mutual_subspace import MutualSubspace

    register("euclidean", Euclidean)
    register("mutual-subspace", MutualSubspace)
