"""Errors the user can act on.

Anything derived from :class:`CalibrateError` is *bad input*: the CLI prints its message on one
line and exits with code 2. Anything else escaping a run is an internal error (exit code 1).
"""

from __future__ import annotations


class CalibrateError(Exception):
    """Bad input. The message names the place (file, field, row) and the fix."""


class RecipeError(CalibrateError):
    """A recipe that cannot be run as written."""

    def __init__(self, message: str, *, source: str | None = None, where: str | None = None):
        self.source = source
        self.where = where
        prefix = ""
        if where and source:
            prefix = f"{where} in {source}: "
        elif where:
            prefix = f"{where}: "
        elif source:
            prefix = f"{source}: "
        super().__init__(prefix + message)


class ParameterError(CalibrateError, ValueError):
    """A component was given a parameter value it cannot use.

    Components raise this from ``__init__``; the recipe loader prefixes the recipe location.
    """


class DataError(CalibrateError, ValueError):
    """Input data that cannot be used (wrong shape, NaN, negative distances, empty classes...)."""


class PluginError(CalibrateError):
    """A plugin is broken or conflicts with another one."""


class CalibrationError(CalibrateError, ValueError):
    """A question a saved or fitted calibration cannot answer (unknown class, target outside (0, 1)),
    or an artifact it cannot load (newer format, missing plugin, corrupt file)."""
