"""Normalisers: distances normalised by cohort scores (Z/T/S/AS-norm), between transform and estimators."""

from __future__ import annotations

from calibrate.contract.hookspecs import RegisterNormalizer, hookimpl


@hookimpl
def calibrate_register_normalizers(register: RegisterNormalizer) -> None:
    from .asnorm import ASNorm
    from .snorm import SNorm
    from .tnorm import TNorm
    from .znorm import ZNorm

    register("znorm", ZNorm)
    register("tnorm", TNorm)
    register("snorm", SNorm)
    register("asnorm", ASNorm)
