"""Evaluators: judging thresholds on evaluation data (report sections and pictures included)."""

from __future__ import annotations

from calibrate.contract.hookspecs import RegisterEvaluator, hookimpl


@hookimpl
def calibrate_register_evaluators(register: RegisterEvaluator) -> None:
    from .fpr import FprEvaluator

    register("fpr", FprEvaluator)
