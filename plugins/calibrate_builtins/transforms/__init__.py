"""Transforms: raw comparison scores to distances in [0, inf)."""

from __future__ import annotations

from calibrate.contract.hookspecs import RegisterTransform, hookimpl


@hookimpl
def calibrate_register_transforms(register: RegisterTransform) -> None:
    from .basic import Identity, SimilarityToDistance
    from .logit import NegLogComplement, ShiftedLogit

    register("identity", Identity)
    register("similarity-to-distance", SimilarityToDistance)
    register("neg-log-complement", NegLogComplement)
    register("shifted-logit", ShiftedLogit)
