"""The installed distribution's version, in a module of its own so that core modules can name it
without importing the package ``calibrate`` (whose __init__ imports the library API above them)."""

from __future__ import annotations

from importlib import metadata

try:
    __version__ = metadata.version("calibrate-thresholds")
except metadata.PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+unknown"
