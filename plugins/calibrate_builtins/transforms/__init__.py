"""Transforms: raw comparison scores to distances in [0, inf).

The hook below registers this room's components; calibrate_builtins/__init__.py gathers the six
hooks into the plugin that the ``calibrate`` entry point names. Modules are imported inside the
hook, so that nothing is imported before the plugins are listed.
"""

from __future__ import annotations

from calibrate.hookspecs import RegisterTransform, hookimpl


@hookimpl
def calibrate_register_transforms(register: RegisterTransform) -> None:
    from .basic import Identity, SimilarityToDistance
    from .logit import NegLogComplement, ShiftedLogit

    register("identity", Identity)
    register("similarity-to-distance", SimilarityToDistance)
    register("neg-log-complement", NegLogComplement)
    register("shifted-logit", ShiftedLogit)
