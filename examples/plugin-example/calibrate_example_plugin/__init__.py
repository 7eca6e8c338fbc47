"""An example calibrate plugin: registers the estimator ``quantile-shift``.

calibrate finds this module through the entry point declared in pyproject.toml::

    [project.entry-points.calibrate]
    example = "calibrate_example_plugin"

and calls every ``calibrate_register_*`` hook implementation in it. Import heavy modules
inside the hook (as here), so that ``calibrate plugins`` stays fast.
"""

from calibrate.contract.hookspecs import hookimpl


@hookimpl
def calibrate_register_estimators(register):
    from .quantile_shift import QuantileShift

    register("quantile-shift", QuantileShift)
