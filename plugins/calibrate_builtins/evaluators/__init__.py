"""Evaluators: judging thresholds on evaluation data (report sections and pictures included).

The hook below registers this room's components; calibrate_builtins/__init__.py gathers the six
hooks into the plugin that the ``calibrate`` entry point names. Modules are imported inside the
hook, so that nothing is imported before the plugins are listed.
"""

from __future__ import annotations

from calibrate.hookspecs import RegisterEvaluator, hookimpl


@hookimpl
def calibrate_register_evaluators(register: RegisterEvaluator) -> None:
    from .fpr import FprEvaluator

    register("fpr", FprEvaluator)
