"""calibrate: verification thresholds at a low target false positive rate from scarce data.

Library use::

    import calibrate
    result = calibrate.run("recipe.yaml")                  # writes the outputs, returns the results
    cal = calibrate.load("results/calibration.json", "auto")
    t = cal.threshold("alice", 0.001)                      # in the matcher's score units (cal.accept_if)
    cal = calibrate.fit(scores, classes, kind="similarity") # or fit from arrays held in memory
    cal.accept(["alice", "bob"], [71.9, 40.2], 0.001)

docs/embedding.md has the whole runtime API. Plugins (the built-ins included) import only the
modules in :data:`PUBLIC_MODULES` (docs/architecture.md; tests/test_import_graph.py enforces it).
"""

from __future__ import annotations

from .version import __version__

#: the entry points, imported on first use (PEP 562) so that ``import calibrate.hookspecs`` or any
#: other public module (what a plugin or a worker imports) costs neither the pipeline nor numpy
_LAZY = {"load": "api", "load_calibration": "api", "run": "api", "validate": "api",
         "Calibration": "calibration", "fit": "calibration", "ProbeCohorts": "cohort"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value  # once resolved, an ordinary attribute
        return value
    raise AttributeError(f"module 'calibrate' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))

#: The core's API for plugins: the only modules of calibrate a plugin (built-in or third-party) may
#: import; a listed package includes its submodules. Everything else (api, calibration, pipeline,
#: partitioned_run, outputs, recipe, manager, registry, kinds, protocol, artifact, runs, cli, ...) is
#: internal and may change without notice. These import only one another (calibrate.testing also the
#: registry, to find components by name), never the pipeline, so importing one does not drag the run
#: machinery into a plugin or a worker.
PUBLIC_MODULES = (
    "calibrate.base",          # component base classes, RunContext, Fold, EvaluationInput, ScoreSplit, FittedModel
    "calibrate.errors",        # CalibrateError and its kinds
    "calibrate.types",         # the data that flows between stages
    "calibrate.params",        # parameter specs (what `calibrate plugins` shows)
    "calibrate.hookspecs",     # hookimpl and the calibrate_register_* hooks
    "calibrate.progress",      # progress tasks for long work
    "calibrate.stats",         # order statistics, interpolated ranks, Clopper-Pearson
    "calibrate.gpd",           # generalised Pareto lower-tail fits
    "calibrate.standardise",   # working scales, per-class location and scale
    "calibrate.world",         # the reference world of the predicted intervals
    "calibrate.prediction",    # predicted FPR intervals
    "calibrate.confidence",    # thresholds with a confidence
    "calibrate.cohort",        # cohort statistics per attempt for normalisers, the fitted normalisation
    "calibrate.scorefiles",    # reading score lists (bob 4/5-column, CSV), pyarrow or pure python
    "calibrate.formatting",    # how rates read in reports
    "calibrate.partitioned",   # sharded data: ShardedScores, PartitionedFitter, lowest_sorted, write_staged
    "calibrate.sanity",        # score-direction checks (AUC of genuine against impostor scores)
    "calibrate.verification",  # one pooled threshold, FNR at equal FPR, EER/AUC/d'/DET, per-class spread, groups
    "calibrate.statecheck",    # checks of a saved model's or transform's state (from_state, set_fitted_state)
    "calibrate.packed",        # long float arrays in a saved state, exact and compact (packed, unpacked)
    "calibrate.safefiles",     # files named by other files: plain names, regular files, .npy/.npz headers checked
    "calibrate.testing",       # the conformance kit for plugin authors
)

__all__ = ["PUBLIC_MODULES", "__version__", "Calibration", "fit", "load", "load_calibration", "run", "validate"]
