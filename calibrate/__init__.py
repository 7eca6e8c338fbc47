"""calibrate: verification thresholds at a low target false positive rate from scarce data.

Library use::

    import calibrate
    result = calibrate.run("recipe.yaml")                  # writes the outputs, returns the results
    cal = calibrate.load("results/calibration.json", "auto")
    t = cal.threshold("alice", 0.001)                      # in the matcher's score units (cal.accept_if)
    cal = calibrate.fit(scores, classes, kind="similarity") # or fit from arrays held in memory
    cal.accept(["alice", "bob"], [71.9, 40.2], 0.001)

docs/embedding.md has the whole runtime API.
"""

from __future__ import annotations

from importlib import metadata

try:
    __version__ = metadata.version("calibrate-thresholds")
except metadata.PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+unknown"

from .api import load_calibration, run, validate  # noqa: E402
from .calibration import Calibration, fit, load  # noqa: E402

__all__ = ["__version__", "Calibration", "fit", "load", "load_calibration", "run", "validate"]
