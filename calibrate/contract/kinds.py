"""The one table of plugin kinds: the registry, the plugin manager, the hook specifications and
the conformance kit all read it, so a new kind is added here and nowhere else.

Each kind has a plural name (used in recipes' structure and the registry), a singular name (used
in messages and in ``calibrate plugins --json``), the base class its components subclass, and the
hook through which plugins register them.
"""

from __future__ import annotations

from dataclasses import dataclass

from calibrate.contract.base import Component, Dataset, Distance, Estimator, Evaluator, Executor, Normalizer, Transform


@dataclass(frozen=True)
class Kind:
    """One kind of plugin component."""

    name: str            #: plural, e.g. ``estimators``
    singular: str        #: e.g. ``estimator``
    base: type[Component]
    summary: str

    @property
    def hook(self) -> str:
        """The hook specification plugins implement to register components of this kind."""
        return f"calibrate_register_{self.name}"


KINDS: tuple[Kind, ...] = (
    Kind("datasets", "dataset", Dataset, "patterns or ready-made comparison scores"),
    Kind("distances", "distance", Distance, "pairwise distances between pattern sets"),
    Kind("transforms", "transform", Transform, "raw scores to distances in [0, inf)"),
    Kind("estimators", "estimator", Estimator, "thresholds per class at any target FPR"),
    Kind("evaluators", "evaluator", Evaluator, "judging thresholds on evaluation data"),
    Kind("executors", "executor", Executor, "where independent pieces of work run"),
    # last, so that the kinds above keep their order in listings (`calibrate plugins`) and messages
    Kind("normalizers", "normalizer", Normalizer, "distances normalised by cohort scores (Z/T/S/AS-norm)"),
)

#: plural name -> kind
BY_NAME: dict[str, Kind] = {k.name: k for k in KINDS}
#: plural and singular names -> kind
_ALIASES: dict[str, Kind] = {**BY_NAME, **{k.singular: k for k in KINDS}}

NAMES: tuple[str, ...] = tuple(k.name for k in KINDS)


def kind(name: str) -> Kind:
    """The kind called ``name`` (plural or singular); ValueError naming the kinds otherwise."""
    try:
        return _ALIASES[str(name)]
    except KeyError:
        raise ValueError(f"unknown component kind {name!r}; use one of {', '.join(NAMES)} (or the singular)") from None
