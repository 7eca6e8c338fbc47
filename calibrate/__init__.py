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

from .version import __version__
from .api import load, load_calibration, run, validate
from .calibration import Calibration, fit

__all__ = ["__version__", "Calibration", "fit", "load", "load_calibration", "run", "validate"]
