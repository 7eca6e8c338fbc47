"""The calibrate conformance kit over this plugin's components: run `pytest tests/` here."""

from calibrate.testing import parametrize_with_checks

from calibrate_example_plugin.quantile_shift import QuantileShift


@parametrize_with_checks([
    ("estimator", "quantile-shift", {}),               # found by name: the plugin must be installed
    ("estimator", QuantileShift, {"weight": 0.0}),     # or given as a class
    ("estimator", QuantileShift, {"weight": 1.0}),
])
def test_conformance(component, check, tmp_path):
    check(component, tmp_path)
