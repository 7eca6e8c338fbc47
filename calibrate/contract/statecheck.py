"""Checks for a model's or a transform's saved state (a public core module), for ``from_state`` and
``set_fitted_state``: a saved calibration is a file the user may have edited or damaged, and JSON holds
strings, booleans, 1e300 and nested lists where numbers are expected. A state that loads must answer
as the fit did, so every field is checked by type and range here, before a model is built from it.

Each check raises :class:`~calibrate.errors.DataError` naming the field (``state.loc``): the CalibrateError a
``from_state`` or ``set_fitted_state`` refuses a damaged state with (docs/plugins.md); the loaders
(calibrate.api, calibrate.saved.partitioned) report it as one CalibrationError adding the file, the
estimator and the fix.

A loader that knows the range of the training distances (the file's own transform applied to its
``training.scores``) rebuilds a model within :func:`training_distances`; :func:`within` (and :func:`distances`)
then refuse a saved value outside it: a finite number no fit on that training data can have given.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from numbers import Integral, Real
from typing import Any

import numpy as np

from calibrate.errors import DataError
from calibrate.contract.packed import is_packed, unpacked

#: the widest GPD shape the fitting code allows (calibrate.statistics.gpd.check_shape_bounds): a saved shape outside
#: it was not fitted
SHAPE_RANGE = (-1.0, 1.0)
#: |y| of a log-scale location beyond which exp(y) is 0 or infinite in float64
LOG_RANGE = 700.0


def bad(field: str, what: str) -> DataError:
    return DataError(f"state.{field} {what}")


def field(state: Mapping[str, Any], key: str, default: Any = ..., where: str = "") -> Any:
    """``state[key]`` (``default`` when it is absent and a default is given); ``where``: the mapping's own
    field name, for the message."""
    if not isinstance(state, Mapping):
        raise DataError(f"state{'.' + where if where else ''} must be a mapping, got {type(state).__name__}")
    if key not in state:
        if default is ...:
            raise bad(f"{where}.{key}" if where else key, "is missing")
        return default
    return state[key]


def number(value: Any, name: str, low: float = -math.inf, high: float = math.inf, *, open_low: bool = False,
           integer: bool = False) -> float:
    """A JSON number (not a string or boolean) in [low, high] ((low, high] with ``open_low``)."""
    ok = isinstance(value, Integral if integer else Real) and not isinstance(value, bool | np.bool_)
    try:
        x = float(value) if ok else math.nan
    except OverflowError:  # an integer too large for a float
        x = math.nan
    if not (ok and math.isfinite(x) and (x > low if open_low else x >= low) and x <= high):
        kind = "a whole number" if integer else "a finite number"
        raise bad(name, f"is {repr(value)[:40]}: must be {kind} in {'(' if open_low else '['}{low:g}, {high:g}]")
    return x


def flag(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise bad(name, f"is {str(value)[:40]!r}: must be true or false")
    return value


def choice(value: Any, name: str, choices: Sequence[str]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise bad(name, f"is {str(value)[:40]!r}: must be one of {', '.join(choices)}")
    return value


def numbers(value: Any, name: str, low: float = -math.inf, high: float = math.inf, *, size: int | None = None,
            open_low: bool = False, integer: bool = False, at_most: int | None = None) -> np.ndarray:
    """A list of JSON numbers (each as :func:`number`), of ``size`` elements when given (at most ``at_most``: what
    the state says), as a float64 array; a long float array may be packed (calibrate.contract.packed: exact, about
    a quarter of the JSON), its declared count held to ``size`` or ``at_most`` before any byte is inflated."""
    if not integer and is_packed(value):
        arr = unpacked(value, f"state.{name}", size if size is not None else at_most)
    elif not isinstance(value, list | tuple | np.ndarray):
        raise bad(name, f"must be a list of numbers, got {type(value).__name__}")
    else:
        try:  # a string, a list or a too large integer among the numbers gives a non-numeric dtype
            arr = np.asarray(value)
        except (ValueError, OverflowError):  # ragged nesting
            arr = np.asarray([], dtype=object)
        # numpy reads [True, 60] as integers: a boolean among the numbers is looked for on its own
        mixed_bool = not isinstance(value, np.ndarray) and any(v is True or v is False for v in value)
        if mixed_bool or arr.dtype.kind not in ("iu" if integer else "iuf") or (arr.size == 0 and len(value) != 0):
            raise bad(name, f"must hold {'whole numbers' if integer else 'numbers'} only (no strings, booleans or lists)")
    if arr.ndim != 1 or (size is not None and arr.size != size):
        raise bad(name, f"must hold {size if size is not None else 'a list of'} numbers, got shape {arr.shape}")
    arr = arr.astype(np.float64)
    inside = np.isfinite(arr) & (arr > low if open_low else arr >= low) & (arr <= high)
    if not inside.all():
        i = int(np.flatnonzero(~inside)[0])
        raise bad(f"{name}[{i}]", f"is {float(arr[i])!r}: must be a finite number in {'(' if open_low else '['}{low:g}, {high:g}]")
    return arr


def declared_size(state: Any, key: str = "offsets") -> int | None:
    """How many values a state's segmented array holds by its own ``offsets`` (their last entry), before that array
    is read (None when they do not say: :func:`sorted_segments` refuses them with the array read)."""
    offsets = state.get(key) if isinstance(state, Mapping) else None
    last = offsets[-1] if isinstance(offsets, list) and offsets else None
    return last if isinstance(last, int) and not isinstance(last, bool) and last >= 0 else None


def sorted_segments(values: np.ndarray, offsets: Any, segments: int, name: str = "values") -> np.ndarray:
    """The int64 offsets of ``segments`` non-empty ascending segments of ``values``, checked."""
    off = numbers(offsets, "offsets", 0, values.size, size=segments + 1, integer=True).astype(np.int64)
    if off[0] != 0 or off[-1] != values.size or np.any(np.diff(off) <= 0):
        raise bad("offsets", "must run from 0 to the number of values, one non-empty segment each")
    within = np.ones(max(values.size - 1, 0), dtype=bool)
    within[off[1:-1] - 1] = False
    if np.any(np.diff(values)[within] < 0):
        raise bad(name, "must be sorted ascending within each class")
    return off


def tail_fit(value: Any, name: str, u_low: float, u_high: float, k_max: int) -> dict[str, float]:
    """A saved GPD lower-tail fit (calibrate.statistics.gpd.TailFit's fields): threshold u within [u_low, u_high] (the
    sample's range), probability p_u in (0, 1], shape xi within :data:`SHAPE_RANGE`, scale beta > 0,
    exceedance count k from 2 to ``k_max``."""
    if not isinstance(value, Mapping):
        raise bad(name, f"must be a mapping, got {type(value).__name__}")
    def get(key: str) -> Any:
        return field(value, key, where=name)

    return {"u": number(get("u"), f"{name}.u", u_low, u_high),
            "p_u": number(get("p_u"), f"{name}.p_u", 0.0, 1.0, open_low=True),
            "xi": number(get("xi"), f"{name}.xi", *SHAPE_RANGE),
            "beta": number(get("beta"), f"{name}.beta", 0.0, open_low=True),
            "k": int(number(get("k"), f"{name}.k", 2, max(k_max, 2), integer=True))}


#: (lowest, highest) training distance of the file being loaded (:func:`training_distances`), or None
_SPAN: ContextVar[tuple[float, float] | None] = ContextVar("calibrate_training_distances", default=None)


@contextmanager
def training_distances(span: tuple[float, float] | None) -> Iterator[None]:
    """While a loader rebuilds a model: the range of the distances its file's transform gives the file's training
    scores (None: unknown, nothing checked against it)."""
    token = _SPAN.set(None if span is None else (float(span[0]), float(span[1])))
    try:
        yield
    finally:
        _SPAN.reset(token)


def distance_span() -> tuple[float, float] | None:
    """The range :func:`training_distances` set (None outside a loader, or when the file records none)."""
    return _SPAN.get()


def within(values: np.ndarray, name: str, span: tuple[float, float] | None = None, what: str = "training distances") -> None:
    """Refuse the first of ``values`` outside ``span`` (default :func:`distance_span`; nothing when None), naming it."""
    span = distance_span() if span is None else span
    if span is None or not np.size(values):
        return
    low, high = span
    slack = 1e-9 * max(1.0, abs(low), abs(high))  # float rounding of the transform, nothing more
    arr = np.asarray(values, dtype=np.float64)
    outside = (arr < low - slack) | (arr > high + slack)
    if outside.any():
        i = int(np.flatnonzero(outside)[0])
        raise bad(f"{name}[{i}]", f"is {float(arr[i])!r}: outside [{low:.6g}, {high:.6g}], the {what} this file's "
                                 "transform gives its training scores (training.scores): no fit on them gives it")


def distances(value: Any, name: str, *, at_most: int | None = None) -> np.ndarray:
    """Saved training distances (:func:`numbers` >= 0, ``at_most`` of them), each :func:`within` the loader's range."""
    arr = numbers(value, name, 0.0, at_most=at_most)
    within(arr, name)
    return arr
