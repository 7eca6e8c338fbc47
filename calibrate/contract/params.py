"""Component parameters, read from ``__init__`` signatures, and checked against recipe values."""

from __future__ import annotations

import inspect
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

from calibrate.errors import ParameterError

_MISSING = inspect.Parameter.empty


@dataclass(frozen=True)
class ParamSpec:
    name: str
    annotation: Any
    default: Any = _MISSING
    doc: str = ""

    @property
    def required(self) -> bool:
        return self.default is _MISSING

    def type_name(self) -> str:
        return type_name(self.annotation)

    def describe(self) -> str:
        default = "required" if self.required else f"default {self.default!r}"
        return f"{self.name} ({self.type_name()}, {default})"


def type_name(tp: Any) -> str:
    origin = get_origin(tp)
    if tp is Any:
        return "any"
    if tp is type(None):
        return "null"
    if origin is Literal:
        return "|".join(str(a) for a in get_args(tp))
    if origin in (Union, types.UnionType):
        return " or ".join(type_name(a) for a in get_args(tp))
    if origin in (list, tuple, typing.Sequence):
        args = [a for a in get_args(tp) if a is not Ellipsis]
        inner = ", ".join(type_name(a) for a in args) if args else "any"
        return f"list of {inner}"
    if origin is dict:
        return "mapping"
    if tp is Path:
        return "path"
    return getattr(tp, "__name__", str(tp))


def _param_docs(factory: type) -> dict[str, str]:
    """``:param name: text`` lines from the class docstring."""
    docs: dict[str, str] = {}
    for line in (inspect.getdoc(factory) or "").splitlines():
        line = line.strip()
        if line.startswith(":param ") and ":" in line[7:]:
            name, text = line[7:].split(":", 1)
            docs[name.strip()] = text.strip()
    return docs


def param_specs(factory: type) -> list[ParamSpec]:
    """The keyword parameters of ``factory.__init__`` with their types and defaults.

    A component that defines no ``__init__`` (only ``object``'s) has no parameters, as in
    scikit-learn's ``_get_param_names``: nobody has to write an empty constructor.
    """
    if factory.__init__ is object.__init__:
        return []
    sig = inspect.signature(factory.__init__)
    try:
        hints = typing.get_type_hints(factory.__init__)
    except Exception:  # unresolvable annotations: fall back to raw ones
        hints = {}
    docs = _param_docs(factory)
    specs = []
    for name, p in sig.parameters.items():
        if name == "self":
            continue
        if p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
            raise TypeError(f"{factory.__name__}.__init__ takes **kwargs/*args; components must list their parameters")
        specs.append(ParamSpec(name, hints.get(name, p.annotation if p.annotation is not _MISSING else Any),
                               p.default, docs.get(name, "")))
    return specs


#: integers read from recipes stay below this (a 64-bit signed integer); larger ones are mistakes
MAX_INT = 2**63


def _digits(value: int) -> str:
    """A huge integer for a message: itself when short, else its first digits and its length."""
    if abs(value) < 10**30:
        return str(value)
    return f"an integer of about {int(value.bit_length() * 0.30103) + 1} digits"  # str() of it may be refused


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def coerce(value: Any, tp: Any, where: str, base_dir: Path | None = None) -> Any:
    """Check ``value`` against annotation ``tp``; return the value to pass (paths resolved)."""
    origin = get_origin(tp)
    if tp is Any or tp is _MISSING:
        return value
    if tp is type(None):
        if value is None:
            return None
        raise ParameterError(f"{where}: expected null, got {value!r}")
    if origin in (Union, types.UnionType):
        return _coerce_union(value, tp, where, base_dir)
    if origin is Literal:
        if value in get_args(tp):
            return value
        raise ParameterError(f"{where}: {value!r} is not one of {', '.join(map(repr, get_args(tp)))}")
    if tp in _SCALARS:
        return _SCALARS[tp](value, where)
    if tp is Path:
        return _coerce_path(value, where, base_dir)
    if origin in (list, tuple, typing.Sequence):
        return _coerce_sequence(value, tp, where, base_dir)
    if origin is dict or tp is dict:
        if not isinstance(value, dict):
            raise ParameterError(f"{where}: expected a mapping, got {value!r}")
        return value
    if isinstance(tp, type):
        if isinstance(value, tp):
            return value
        raise ParameterError(f"{where}: expected {type_name(tp)}, got {value!r}")
    return value


def _coerce_union(value: Any, tp: Any, where: str, base_dir: Path | None) -> Any:
    others = [a for a in get_args(tp) if a is not type(None)]
    if value is not None and len(others) == 1:  # `X | None` given a value: X's own message (e.g. a missing file)
        return coerce(value, others[0], where, base_dir)
    for arg in get_args(tp):
        try:
            return coerce(value, arg, where, base_dir)
        except ParameterError:
            continue
    raise ParameterError(f"{where}: expected {type_name(tp)}, got {value!r}")


def _coerce_bool(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    raise ParameterError(f"{where}: expected true or false, got {value!r}")


def _coerce_int(value: Any, where: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        if abs(value) >= MAX_INT:
            raise ParameterError(f"{where}: {_digits(value)} is too large for an integer parameter "
                                 f"(at most {MAX_INT - 1:,})")
        return value
    raise ParameterError(f"{where}: expected an integer, got {_shown(value)}")


def _coerce_float(value: Any, where: str) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:
            raise ParameterError(f"{where}: {_digits(value)} is too large for a number") from None
    raise ParameterError(f"{where}: expected a number, got {_shown(value)}")


def _coerce_str(value: Any, where: str) -> str:
    if isinstance(value, str):
        return value
    raise ParameterError(f"{where}: expected a string, got {value!r}")


_SCALARS = {bool: _coerce_bool, int: _coerce_int, float: _coerce_float, str: _coerce_str}


def _coerce_path(value: Any, where: str, base_dir: Path | None) -> Path:
    if not isinstance(value, (str, Path)):
        raise ParameterError(f"{where}: expected a file path, got {value!r}")
    path = Path(value).expanduser()
    if not path.is_absolute() and base_dir is not None:
        path = (base_dir / path)
    try:
        path = path.resolve()
    except (OSError, RuntimeError) as exc:  # RuntimeError: a symbolic-link loop (Python < 3.13)
        why = "a symbolic-link loop" if isinstance(exc, RuntimeError) else exc.strerror or exc
        raise ParameterError(f"{where}: file or folder {str(path)[:200]!r} cannot be used ({why}); give the path of "
                             "the file itself") from None
    # a glob (sharded datasets take one) is resolved like a path; what it matches is the dataset's to check
    if not path.exists() and not (any(ch in str(value) for ch in "*?[") and path.parent.exists()):
        raise ParameterError(f"{where}: file or folder {str(path)!r} does not exist "
                             f"(paths are relative to the recipe file)")
    return path


def _coerce_sequence(value: Any, tp: Any, where: str, base_dir: Path | None) -> list | tuple:
    if not isinstance(value, (list, tuple)):
        raise ParameterError(f"{where}: expected a list, got {value!r}")
    origin, args = get_origin(tp), get_args(tp)
    if origin is tuple and args and args[-1] is not Ellipsis:
        if len(value) != len(args):
            raise ParameterError(f"{where}: expected a list of {len(args)} values, got {len(value)}")
        return tuple(coerce(v, a, f"{where}[{i}]", base_dir) for i, (v, a) in enumerate(zip(value, args)))
    inner = args[0] if args else Any
    items = [coerce(v, inner, f"{where}[{i}]", base_dir) for i, v in enumerate(value)]
    return tuple(items) if origin is tuple else items
