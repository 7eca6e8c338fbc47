"""Threshold estimators: the paper's ncx2 grid (ncx2/), the empirical baselines and the estimators
beyond the paper.
"""

from __future__ import annotations

from calibrate.contract.hookspecs import RegisterEstimator, hookimpl


@hookimpl
def calibrate_register_estimators(register: RegisterEstimator) -> None:
    from .anchored import Anchored
    from .auto import Auto, AutoBulk
    from .gpd_tail import GpdTail
    from .interp import ClassInterp, GenericInterp
    from .ncx2.grid import Ncx2Grid
    from .ncx2.tail import Ncx2Cv, Ncx2Tail
    from .shrinkage import Shrinkage
    from .znorm import Znorm

    register("generic-interp", GenericInterp)
    register("class-interp", ClassInterp)
    register("ncx2-grid", Ncx2Grid)
    register("gpd-tail", GpdTail)
    register("znorm", Znorm)
    register("shrinkage", Shrinkage)
    register("ncx2-tail", Ncx2Tail)
    register("ncx2-cv", Ncx2Cv)
    register("auto", Auto)
    register("auto-bulk", AutoBulk)
    register("anchored", Anchored)
