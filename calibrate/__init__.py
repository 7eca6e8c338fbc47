"""calibrate: verification thresholds at a low target false positive rate from scarce data.

Library use::

    import calibrate
    result = calibrate.run("recipe.yaml")                  # writes the outputs, returns the results
    cal = calibrate.load("results/calibration.json", "auto")
    t = cal.threshold("alice", 0.001)                      # in the matcher's score units (cal.accept_if)
    cal = calibrate.fit(scores, classes, real=real, kind="similarity")  # or fit from arrays held in memory
    cal.accept(["alice", "bob"], [71.9, 40.2], 0.001)

docs/embedding.md has the whole runtime API. Where things are (each package's docstring says more;
:data:`LAYERS` is the order in which they may import one another, lowest first):

* ``errors``, ``formatting``, ``version``: leaf modules every layer uses;
* ``files``: reading and writing files (score lists, untrusted names, user-named files, output folders);
* ``contract``: the plugin contract (base classes, hooks, parameters, the data types, kinds, registry);
* ``statistics``: order statistics, tails, working scales, verification figures, score checks;
* ``predicted``: the reference world, predicted FPR intervals, thresholds with a confidence;
* ``normalisation``: cohort statistics, fitted normalisations, the normaliser stage;
* ``recipe``: the YAML recipe, its validation, the enrollment protocol, groups files;
* ``saved``: saved calibrations (fit, answer, the JSON format, partitioned ones, assessment);
* ``running``: running a recipe (the stages, the sharded route, outputs);
* ``testing``: the conformance kit for plugin authors;
* ``api`` (run, validate, load) and ``cli`` (the command line) on top.

Plugins (the built-ins included) import only the modules in :data:`PUBLIC_MODULES`
(docs/architecture.md; tests/test_import_graph.py enforces it and :data:`LAYERS`). The names those
modules had before the core was grouped into packages (``calibrate.base``, ``calibrate.types``, ...:
:data:`FORMER_NAMES`) keep working for plugins written against them.
"""

from __future__ import annotations

# The former names first: from the moment this module is in sys.modules, another thread importing
# ``calibrate.base`` no longer waits for it to finish, so the finder is put in place before anything else
# runs here (installed at the end, it failed every run of 16 threads importing former names at once; a
# thread switch before these lines is still possible, and failed 1 run in about 20 of that measurement)

#: The public modules' names before the core was grouped into packages (issue 33): a plugin written
#: against them keeps working. ``import calibrate.base`` gives the very module calibrate.contract.base
#: (one module object, two names); new code uses the names in PUBLIC_MODULES.
FORMER_NAMES = {
    "calibrate.base": "calibrate.contract.base",
    "calibrate.types": "calibrate.contract.types",
    "calibrate.params": "calibrate.contract.params",
    "calibrate.hookspecs": "calibrate.contract.hookspecs",
    "calibrate.progress": "calibrate.contract.progress",
    "calibrate.partitioned": "calibrate.contract.sharded",
    "calibrate.statecheck": "calibrate.contract.statecheck",
    "calibrate.packed": "calibrate.contract.packed",
    "calibrate.stats": "calibrate.statistics.order",
    "calibrate.gpd": "calibrate.statistics.gpd",
    "calibrate.standardise": "calibrate.statistics.standardise",
    "calibrate.verification": "calibrate.statistics.verification",
    "calibrate.sanity": "calibrate.statistics.sanity",
    "calibrate.world": "calibrate.predicted.world",
    "calibrate.prediction": "calibrate.predicted.interval",
    "calibrate.confidence": "calibrate.predicted.confidence",
    "calibrate.cohort": "calibrate.normalisation.cohort",
    "calibrate.scorefiles": "calibrate.files.score_lists",
    "calibrate.safefiles": "calibrate.files.untrusted",
}


class _FormerNames:
    """Finds a module by its former name (FORMER_NAMES): importing it imports the module under its new
    name and puts that same module object under the former name too (the import system takes what
    ``exec_module`` left in sys.modules), so identity, monkeypatching and pickling are unaffected."""

    def find_spec(self, fullname: str, path=None, target=None):
        if fullname not in FORMER_NAMES:
            return None
        from importlib.util import spec_from_loader

        return spec_from_loader(fullname, self)

    def create_module(self, spec):
        return None  # a placeholder, replaced in exec_module

    def exec_module(self, module) -> None:
        import importlib
        import sys

        sys.modules[module.__name__] = importlib.import_module(FORMER_NAMES[module.__name__])


def _install_former_names() -> None:
    import sys

    # by name, not isinstance: importlib.reload(calibrate) makes a new class, and one finder is enough
    if not any(type(f).__module__ == __name__ and type(f).__qualname__ == "_FormerNames" for f in sys.meta_path):
        sys.meta_path.append(_FormerNames())


_install_former_names()

from calibrate.version import __version__

#: the entry points, imported on first use (PEP 562) so that ``import calibrate.contract.hookspecs`` or any
#: other public module (what a plugin or a worker imports) costs neither the pipeline nor numpy
_LAZY = {"load": "calibrate.api", "load_calibration": "calibrate.api", "run": "calibrate.api",
         "validate": "calibrate.api", "Calibration": "calibrate.saved.calibration",
         "fit": "calibrate.saved.fitting", "ProbeCohorts": "calibrate.normalisation.cohort"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value  # once resolved, an ordinary attribute
        return value
    if f"{__name__}.{name}" in FORMER_NAMES:
        # ``calibrate.types`` after ``import calibrate.base``: before the move, importing a public module set it
        # (and the modules it imported) as an attribute of the package, and plugins came to read that attribute;
        # the modules now set their new names, so the former name is imported here (the module itself, as an
        # import of it gives)
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'calibrate' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))

#: The core's API for plugins: the only modules of calibrate a plugin (built-in or third-party) may
#: import; a listed package includes its submodules. Everything else (api, saved.calibration,
#: running.*, recipe.*, contract.manager, contract.registry, contract.kinds, saved.json_format, cli.*,
#: ...) is internal and may change without notice. These import only one another and the modules they
#: gather names from (calibrate.testing also the kinds table and the plugin manager, to find components
#: by name, saved.grouped and saved.reading, to rebuild saved models as a loader does), never the
#: pipeline, so importing one does not drag the run machinery into a plugin or a worker.
PUBLIC_MODULES = (
    "calibrate.errors",                   # CalibrateError and its kinds
    "calibrate.formatting",               # how rates read in reports
    "calibrate.contract.base",            # component base classes, RunContext, Fold, EvaluationInput, ScoreSplit, FittedModel
    "calibrate.contract.types",           # the data that flows between stages
    "calibrate.contract.params",          # parameter specs (what `calibrate plugins` shows)
    "calibrate.contract.hookspecs",       # hookimpl and the calibrate_register_* hooks
    "calibrate.contract.progress",        # progress tasks for long work
    "calibrate.contract.sharded",         # sharded data: ShardedScores, PartitionedFitter, lowest_sorted, write_staged
    "calibrate.contract.statecheck",      # checks of a saved model's or transform's state (from_state, set_fitted_state)
    "calibrate.contract.packed",          # long float arrays in a saved state, exact and compact (packed, unpacked)
    "calibrate.statistics.order",         # order statistics, interpolated ranks, Clopper-Pearson
    "calibrate.statistics.gpd",           # generalised Pareto lower-tail fits
    "calibrate.statistics.standardise",   # working scales, per-class location and scale
    "calibrate.statistics.verification",  # one pooled threshold, FNR at equal FPR, EER/AUC/d'/DET, per-class spread, groups
    "calibrate.statistics.eer_interval",  # the EER's bootstrap interval (over enrolled classes, or attempts)
    "calibrate.statistics.sanity",        # score-direction checks (AUC of genuine against impostor scores)
    "calibrate.predicted.world",          # the reference world of the predicted intervals
    "calibrate.predicted.interval",       # predicted FPR intervals
    "calibrate.predicted.confidence",     # thresholds with a confidence
    "calibrate.normalisation.cohort",     # cohort statistics per attempt for normalisers, the fitted normalisation
    "calibrate.files.score_lists",        # reading score lists (bob 4/5-column, CSV), pyarrow or pure python
    "calibrate.files.untrusted",          # files named by other files: plain names, regular files, .npy/.npz headers checked
    "calibrate.testing",                  # the conformance kit for plugin authors
)

#: Which part of the core may import which (tests/test_import_graph.py checks it): a module may import
#: modules of its own layer and of the layers before it, never of a later one. Within a layer, modules
#: import one another without a cycle. ``calibrate`` itself (this file) imports only calibrate.version
#: at import time; its entry points are imported on first use.
LAYERS = (
    ("calibrate.errors", "calibrate.formatting", "calibrate.version"),
    ("calibrate.files",),
    ("calibrate.contract",),
    ("calibrate.statistics",),
    ("calibrate.predicted",),
    ("calibrate.normalisation",),
    ("calibrate.recipe",),
    ("calibrate.saved",),
    ("calibrate.running",),
    ("calibrate.testing",),
    ("calibrate.api",),
    ("calibrate.cli",),
)

__all__ = ["FORMER_NAMES", "LAYERS", "PUBLIC_MODULES", "__version__", "Calibration", "fit", "load", "load_calibration",
           "run", "validate"]
