"""The plugin contract as declared in code, read back: what a component of each kind must define, may
define (with the default), and must leave alone; and the kit's check that a component keeps to it
(:func:`check_contract`). docs/plugins.md's contract tables are generated from the same reading
(:mod:`calibrate.testing.contract_docs`).

The declarations live on the base classes (:mod:`calibrate.contract.base`; see its module docstring) and on
:class:`calibrate.contract.sharded.PartitionedFitter`: ``@abstractmethod`` (required), ``@optional`` (may be
overridden; its docstring ends with ``Default: ...``), ``typing.final`` (provided: do not override), and
annotated class attributes with a ``#:`` comment above them (required without a value, optional with one).
A kind added to :data:`calibrate.contract.kinds.KINDS` is covered without further work; its base class must
classify every method, or :func:`members` raises naming the one it cannot place.
"""

from __future__ import annotations

import ast
import difflib
import functools
import inspect
import re
import textwrap
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from calibrate.contract.base import CONTRACT_MARK, Component, Estimator, FittedModel
from calibrate.contract.kinds import BY_NAME, KINDS
from calibrate.contract.sharded import PartitionedFitter
from calibrate.testing.common import CheckSkipped, ComponentCase, _build, _params, _tmpdir

ROLES = ("required", "optional", "provided")


@dataclass(frozen=True)
class Member:
    """One declared member of a contract class."""

    owner: type
    name: str
    role: str          #: required, optional or provided
    signature: str     #: as the tables show it: ``read_shard(shard, column_offset) -> ...`` or ``produces: ... = None``
    doc: str           #: the declaration's text, one paragraph, markdown
    default: str       #: what the default does (optional members), else ""
    is_attribute: bool = False


def contract_classes() -> list[tuple[str, type, str]]:
    """(title, class, how it is reached) for every class whose members make the contract, in docs order:
    what every component shares, each kind's base class, and what estimators return."""
    out: list[tuple[str, type, str]] = [("Every component", Component, "the base of every kind below")]
    for kind in KINDS:
        out.append((kind.name.capitalize(), kind.base, f"registered through `{kind.hook}`"))
        if kind.base is Estimator:
            out.append(("Fitted models", FittedModel, "what `Estimator._fit` returns (`model_class`)"))
            out.append(("Partitioned fitters", PartitionedFitter,
                        "what `Estimator.partitioned()` returns, for sharded runs (a `typing.Protocol`)"))
    return out


# ---- reading the declarations --------------------------------------------------------------------

def _function(value: Any):
    """The function behind a class attribute (plain, classmethod, staticmethod or property), else None."""
    if isinstance(value, (classmethod, staticmethod)):
        return value.__func__
    if isinstance(value, property):
        return value.fget
    return value if inspect.isfunction(value) else None


def role_of(cls: type, name: str, function) -> str | None:
    """required / optional / provided for a method of a contract class; None when it is not part of it."""
    if getattr(function, CONTRACT_MARK, None) == "optional":
        return "optional"  # a dunder too, when marked (an executor's __enter__ and __exit__)
    if name.startswith("__") and name.endswith("__"):
        return None
    if getattr(function, "__isabstractmethod__", False):
        return "required"
    if getattr(function, "__final__", False):
        return "provided"
    if getattr(cls, "_is_protocol", False):
        return "required"
    raise TypeError(f"{cls.__module__}.{cls.__qualname__}.{name} is not classified: mark it @abstractmethod "
                    "(required), @optional (a component may override it; end its docstring with 'Default: ...') or "
                    "@typing.final (provided by the base class)")


@functools.lru_cache(maxsize=None)
def attribute_comments(cls: type) -> dict[str, str]:
    """The ``#:`` comment lines above each annotated class attribute of ``cls``, joined (read from its source
    once per class and process: the kit checks every component against the same base classes)."""
    source = textwrap.dedent(inspect.getsource(cls))
    lines = source.splitlines()
    out = {}
    for node in ast.parse(source).body[0].body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            comments, k = [], node.lineno - 2
            while k >= 0 and lines[k].strip().startswith("#:"):
                comments.insert(0, lines[k].strip()[2:].strip())
                k -= 1
            out[node.target.id] = " ".join(comments)
    return out


_ROLES_RST = [(re.compile(r":(?:class|meth|func|data|mod|attr|exc):`~?([^`]+)`"), r"`\1`"),
              (re.compile(r"``([^`]+)``"), r"`\1`"),
              (re.compile(r":param (\w+):"), r"`\1`:"),
              (re.compile(r":returns?:"), "Returns:")]


def to_markdown(text: str) -> str:
    """A docstring or comment as one markdown paragraph (reST roles and literals as code spans)."""
    text = " ".join(text.split())
    for pattern, repl in _ROLES_RST:
        text = pattern.sub(repl, text)
    return text


def split_default(text: str) -> tuple[str, str]:
    """(what the member is for, what its default does) from a text ending with ``Default: ...``."""
    at = text.rfind("Default:")
    if at < 0:
        return text, ""
    return text[:at].rstrip(" .;,") + ".", text[at + len("Default:"):].strip()


def _signature(name: str, function) -> str:
    sig = inspect.signature(function)
    params = [p for i, p in enumerate(sig.parameters.values()) if not (i == 0 and p.name in ("self", "cls"))]
    shown = ", ".join(("*" if p.kind is p.VAR_POSITIONAL else "") + p.name
                      + (f"={p.default!r}" if p.default is not p.empty else "") for p in params)
    ret = sig.return_annotation
    return f"{name}({shown})" + ("" if ret is sig.empty or ret == "None" else f" -> {str(ret).replace(chr(39), '')}")


def members(cls: type) -> list[Member]:
    """The contract members ``cls`` itself declares, in source order: attributes, then methods."""
    out = []
    comments = attribute_comments(cls)
    for name, annotation in cls.__dict__.get("__annotations__", {}).items():
        has_value = name in cls.__dict__
        text = to_markdown(comments.get(name, ""))
        doc, default = split_default(text) if has_value else (text, "")
        value = f" = {cls.__dict__[name]!r}" if has_value else ""
        out.append(Member(cls, name, "optional" if has_value else "required", f"{name}: {annotation}{value}", doc,
                          default, is_attribute=True))
    for name, value in cls.__dict__.items():
        function = _function(value)
        if function is None:
            continue
        role = role_of(cls, name, function)
        if role is None:
            continue
        text = to_markdown(inspect.getdoc(function) or "")
        doc, default = split_default(text) if role == "optional" else (text, "")
        out.append(Member(cls, name, role, _signature(name, function), doc, default))
    return out


# ---- the conformance check ------------------------------------------------------------------------

def _conforms(value: Any, tp: Any) -> bool:
    """Whether ``value`` is of the declared type ``tp`` (the forms the base classes use)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_conforms(value, a) for a in args)
    if tp is type(None):
        return value is None
    if origin is typing.Literal:
        return any(value == a and type(value) is type(a) for a in args)
    if origin is tuple:
        if not isinstance(value, tuple):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_conforms(v, args[0]) for v in value)
        return not args or (len(args) == len(value) and all(_conforms(v, a) for v, a in zip(value, args)))
    if origin is type:
        return inspect.isclass(value) and (not args or not inspect.isclass(args[0]) or issubclass(value, args[0]))
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if inspect.isclass(tp) and origin is None:
        return isinstance(value, tp)
    return True  # a form the base classes do not use: not checked


def _takes_the_call(base_function, function) -> bool:
    """Whether ``function`` (an override) accepts every call the core makes to ``base_function``."""
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for p in list(inspect.signature(base_function).parameters.values())[1:]:
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            args.append(None)
        elif p.kind is p.VAR_POSITIONAL:
            args += [None] * 3
        elif p.kind is p.KEYWORD_ONLY:
            kwargs[p.name] = None
    try:
        inspect.signature(function).bind(None, *args, **kwargs)
    except TypeError:
        return False
    return True


def _own_classes(cls: type, base: type) -> list[type]:
    """The classes of ``cls``'s MRO that the component's author wrote (those below ``base``)."""
    return [k for k in cls.__mro__ if k is not base and issubclass(k, base) and k not in base.__mro__]


def contract_problems(cls: type, base: type) -> list[str]:
    """How ``cls`` (a component class, or a model class against FittedModel) strays from ``base``'s contract."""
    declared = {m.name: m for c in base.__mro__ if any(c is k for _, k, _ in contract_classes()) for m in members(c)}
    declared_in = {m.name: m.owner for m in declared.values()}
    callable_names = {n for n, m in declared.items() if not m.is_attribute}
    problems = []
    for klass in _own_classes(cls, base):
        for name, value in klass.__dict__.items():
            function = _function(value)
            m = declared.get(name)
            if m is not None and m.role == "provided":
                private = f"_{name}" if f"_{name}" in declared else "the private method it calls"
                problems.append(f"{klass.__name__}.{name} overrides {declared_in[name].__name__}.{name}, which the core "
                                f"provides (it validates, then calls {private}): override {private} instead")
            elif m is not None and function is not None and name in callable_names:
                base_function = _function(declared_in[name].__dict__[name])
                if not isinstance(value, property) and not _takes_the_call(base_function, function):
                    problems.append(f"{klass.__name__}.{name}{inspect.signature(function)} cannot take the call the "
                                    f"core makes: {m.signature}")
            elif m is None and function is not None and not (name.startswith("__") and name.endswith("__")):
                near = difflib.get_close_matches(name, [n for n, d in declared.items() if d.role != "provided"], 1, 0.85)
                if near:
                    problems.append(f"{klass.__name__}.{name} is not part of the contract, and the core never calls it: "
                                    f"did you mean {near[0]} ({declared[near[0]].signature})?")
    return problems


def attribute_problems(obj: Any, base: type) -> list[str]:
    """Declared attributes of ``base`` (and its contract ancestors) that ``obj`` lacks or holds out of type."""
    problems = []
    for klass in base.__mro__:
        if not any(klass is k for _, k, _ in contract_classes()):
            continue
        hints = typing.get_type_hints(klass)
        for m in members(klass):
            if not m.is_attribute:
                continue
            if isinstance(obj, type) and isinstance(inspect.getattr_static(obj, m.name, None), property):
                continue  # computed per instance; checked when an instance can be built
            value = getattr(obj, m.name, _MISSING)
            if value is _MISSING:
                problems.append(f"the required class attribute {m.name} is not set ({m.doc})")
            elif not _conforms(value, hints[m.name]):
                problems.append(f"{m.name} = {value!r} is not a {m.signature.partition(': ')[2].split(' = ')[0]}")
    return problems


_MISSING = object()


def check_contract(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """Keeps to the contract declared on its base class (docs/plugins.md's contract tables): overrides no
    provided method (``fit``, ``load``, ``apply``, ...), names its optional methods as declared (no near miss
    such as ``fitted_states``, which the core would never call), overrides them with parameters the core can
    pass, and gives declared attributes values of their declared types; an estimator's ``model_class`` keeps
    to the FittedModel contract the same way."""
    base = BY_NAME[case.kind].base
    problems = contract_problems(case.factory, base)
    if case.kind == "estimators":
        model_class = getattr(case.factory, "model_class", None)
        if inspect.isclass(model_class) and issubclass(model_class, FittedModel):
            problems += contract_problems(model_class, FittedModel)
    try:
        with _tmpdir(tmp_path) as tmp:
            subject: Any = _build(case, _params(case, tmp))  # instance values (a property, a parameter)
    except CheckSkipped:
        subject = case.factory
    problems += attribute_problems(subject, base)
    assert not problems, f"{case.id} strays from the contract:\n  " + "\n  ".join(problems)
