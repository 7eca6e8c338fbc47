"""Hook specifications: one per plugin kind.

Hooks *register* components; they do not compute. The recipe then chooses a component by the
name it was registered under. Every hook is called once per plugin, with a ``register``
callable bound to that plugin, so that the registry knows who registered what.

``register(name, factory)``
    ``name`` is the string a recipe uses (``plugin: NAME``); lower-case words joined by ``-``.
    ``factory`` is a class (subclass of the matching base in :mod:`calibrate.contract.base`) whose
    ``__init__`` takes keyword parameters only, each annotated with a type and, where optional,
    a default. The recipe loader reads that signature to validate recipes and to list the
    parameters in ``calibrate plugins``. Registering a name that another plugin already
    registered for the same kind is an error naming both plugins.

Every hook returns ``None``; results come only through ``register``. Hook implementations are
marked with :data:`hookimpl` (``pluggy.HookimplMarker("calibrate")``).

What a registered class must define, may define (with the default) and must leave alone is declared
on its base class in :mod:`calibrate.contract.base` (``@abstractmethod``, ``@optional``, ``typing.final``, and
annotated class attributes); docs/plugins.md's contract tables are generated from those declarations.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

import pluggy

if TYPE_CHECKING:
    from calibrate.contract.base import Dataset, Distance, Estimator, Evaluator, Executor, Normalizer, Transform  # noqa: F401 (string annotations)

hookspec = pluggy.HookspecMarker("calibrate")
PROJECT = "calibrate"
hookimpl = pluggy.HookimplMarker(PROJECT)

C = TypeVar("C", contravariant=True)


class Register(Protocol, Generic[C]):
    """The callable a hook receives: ``register(name, factory)``, typed by the kind's base class,
    so that a type checker flags an estimator registered through the datasets hook."""

    def __call__(self, name: str, factory: type[C]) -> None: ...


RegisterDataset = Register["Dataset"]
RegisterDistance = Register["Distance"]
RegisterTransform = Register["Transform"]
RegisterEstimator = Register["Estimator"]
RegisterEvaluator = Register["Evaluator"]
RegisterExecutor = Register["Executor"]
RegisterNormalizer = Register["Normalizer"]


@hookspec
def calibrate_register_datasets(register: RegisterDataset) -> None:
    """Register dataset components (subclasses of :class:`calibrate.contract.base.Dataset`).

    :param register: ``register(name, factory)``; call once per dataset this plugin provides.

    A dataset's ``_load(context)`` returns a :class:`calibrate.contract.types.PatternSet` (samples with
    class and set labels, to be compared by a distance) or a :class:`calibrate.contract.base.ScoreSplit`
    (ready-made training and evaluation comparison matrices). Parameters annotated
    ``pathlib.Path`` are resolved relative to the recipe file and must exist.
    """


@hookspec
def calibrate_register_distances(register: RegisterDistance) -> None:
    """Register distance components (subclasses of :class:`calibrate.contract.base.Distance`).

    :param register: ``register(name, factory)``; call once per distance this plugin provides.

    A distance's ``_pairwise(probes, gallery, context)`` receives two
    :class:`calibrate.contract.types.SetCollection` and returns a ``(len(probes), len(gallery))`` array
    of non-negative distances. It must not depend on the order of the other sets.
    """


@hookspec
def calibrate_register_transforms(register: RegisterTransform) -> None:
    """Register transform components (subclasses of :class:`calibrate.contract.base.Transform`).

    :param register: ``register(name, factory)``; call once per transform this plugin provides.

    A transform maps raw comparison values to distances in ``[0, inf)``, element-wise.
    ``_fit(train)`` may learn constants from the training matrix only; ``_apply(values, kind)``
    must raise :class:`calibrate.errors.DataError` for values outside its domain.
    """


@hookspec
def calibrate_register_estimators(register: RegisterEstimator) -> None:
    """Register threshold estimators (subclasses of :class:`calibrate.contract.base.Estimator`).

    :param register: ``register(name, factory)``; call once per estimator this plugin provides.

    An estimator's ``_fit(impostors, context)`` receives the training impostor distances of
    every enrolled class (:class:`calibrate.contract.types.ImpostorDistances`) and returns a
    :class:`calibrate.contract.base.FittedModel`, which then gives a threshold for any class at any
    target FPR. Thresholds must be non-decreasing in the target FPR. The estimator class sets
    ``model_class`` so that saved calibrations can be loaded again.
    """


@hookspec
def calibrate_register_evaluators(register: RegisterEvaluator) -> None:
    """Register evaluators (subclasses of :class:`calibrate.contract.base.Evaluator`).

    :param register: ``register(name, factory)``; call once per evaluator this plugin provides.

    An evaluator's ``_evaluate(data, context)`` receives a
    :class:`calibrate.contract.base.EvaluationInput` (fitted models, threshold tables, training and
    evaluation matrices, targets) and returns a :class:`calibrate.contract.types.EvaluationResult`:
    per-estimator results per target, extra report sections and files to write.
    """


@hookspec
def calibrate_register_executors(register: RegisterExecutor) -> None:
    """Register executors (subclasses of :class:`calibrate.contract.base.Executor`).

    :param register: ``register(name, factory)``; call once per executor this plugin provides.

    An executor runs independent pieces of work for the distance and fitting stages:
    ``_map(function, items)`` returns ``[function(item) for item in items]`` in input order,
    with results identical to that serial loop. It is used as a context manager around a run
    (start workers in ``__enter__``, stop them in ``__exit__``). The recipe chooses one with
    ``executor: {plugin: NAME, ...}``; the default is ``serial``.
    """


@hookspec
def calibrate_register_normalizers(register: RegisterNormalizer) -> None:
    """Register score normalisers (subclasses of :class:`calibrate.contract.base.Normalizer`).

    :param register: ``register(name, factory)``; call once per normaliser this plugin provides.

    A normaliser sits between the transform and the estimators (recipe key ``normalizer:``, optional).
    ``_statistics(cohort)`` receives cohort distances, one row per enrolled class or per attempt's probe,
    each sorted ascending, and returns ``{name: one value per row}``; ``_normalize(distances, enrolled,
    probe)`` combines each attempt's distance with its class's and its probe's statistics into a
    normalised score z (lower = more alike), which the core maps to the distance ``exp(z)``. ``sides``
    names the cohort sides it reads (``"enrolled"``, ``"probe"``). Names are per kind, so a normaliser
    may share its name with a component of another kind (``znorm`` is also an estimator).
    """
