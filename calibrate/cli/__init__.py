"""The ``calibrate`` command line (typer): the typer application and how it fails (app), the recipe commands
(run, validate, threshold, accept, plugins: commands), the score-list commands (fit, evaluate: fit_evaluate),
and what the commands share: their checks (checks) and what they read (inputs).

May import: anything in calibrate (it is the top layer); nothing imports it.
"""


from __future__ import annotations


def main() -> None:
    """The console script's entry point (``calibrate = calibrate.cli:main``)."""
    from calibrate.cli.commands import main as _main

    _main()
