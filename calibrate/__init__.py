"""calibrate: verification thresholds at a low target false positive rate from scarce data.

Library use::

    import calibrate
    result = calibrate.run("recipe.yaml")                 # writes the outputs, returns the results
    model = calibrate.load_calibration("results/calibration.json", "ncx2-grid")
    tau = model.threshold("alice", 0.001)                 # accept when distance <= tau
"""

from __future__ import annotations

from importlib import metadata

try:
    __version__ = metadata.version("calibrate-thresholds")
except metadata.PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+unknown"

from .api import load_calibration, run, validate  # noqa: E402

__all__ = ["__version__", "load_calibration", "run", "validate"]
