"""Name -> component, per plugin kind, with errors that say what was meant and what exists."""

from __future__ import annotations

import difflib
import inspect
import re
from dataclasses import dataclass, field

from calibrate.errors import PluginError, RecipeError
from calibrate.contract.kinds import BY_NAME, NAMES
from calibrate.contract.params import ParamSpec, param_specs

#: plural kind name -> singular (from the one table in :mod:`calibrate.contract.kinds`)
SINGULAR = {k.name: k.singular for k in BY_NAME.values()}
#: a component's name: lower-case words of letters and digits joined by single hyphens (ncx2-grid)
NAME_PATTERN = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*")
MAX_NAME = 40


@dataclass(frozen=True)
class ComponentInfo:
    kind: str
    name: str
    factory: type
    plugin: str
    distribution: str | None = None
    version: str | None = None

    @property
    def params(self) -> list[ParamSpec]:
        return param_specs(self.factory)

    @property
    def summary(self) -> str:
        doc = inspect.getdoc(self.factory) or ""
        return doc.strip().splitlines()[0] if doc.strip() else ""

    def as_dict(self) -> dict:
        return {
            "name": self.name, "kind": SINGULAR[self.kind], "summary": self.summary,
            "plugin": self.plugin, "distribution": self.distribution, "version": self.version,
            "parameters": [{"name": p.name, "type": p.type_name(), "required": p.required,
                            "default": None if p.required else _jsonable(p.default), "doc": p.doc}
                           for p in self.params],
        }


def _jsonable(value):
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, (str, int, float, bool, type(None), list, dict)):
        return value
    return str(value)


@dataclass
class Registry:
    components: dict[str, dict[str, ComponentInfo]] = field(default_factory=lambda: {k: {} for k in NAMES})

    def add(self, info: ComponentInfo) -> None:
        if not isinstance(info.name, str) or len(info.name) > MAX_NAME or not NAME_PATTERN.fullmatch(info.name):
            raise PluginError(f"plugin {info.plugin!r} registered a {SINGULAR[info.kind]} with the name {info.name!r}; "
                              f"component names are lower-case words of letters and digits joined by hyphens, at most "
                              f"{MAX_NAME} characters (e.g. 'adaptive-znorm'), as recipes spell them")
        base = BY_NAME[info.kind].base
        if not (inspect.isclass(info.factory) and issubclass(info.factory, base)):
            raise PluginError(f"plugin {info.plugin!r} registered {SINGULAR[info.kind]} {info.name!r} as "
                              f"{info.factory!r}, which is not a subclass of calibrate.contract.base.{base.__name__}")
        try:
            param_specs(info.factory)  # fails loudly on **kwargs
        except TypeError as exc:
            raise PluginError(f"plugin {info.plugin!r} registered {SINGULAR[info.kind]} {info.name!r}: {exc}") from None
        existing = self.components[info.kind].get(info.name)
        if existing is not None:
            raise PluginError(f"{SINGULAR[info.kind]} {info.name!r} is registered twice: by plugin {existing.plugin!r} "
                              f"({existing.distribution or 'not installed'}) and by plugin {info.plugin!r} "
                              f"({info.distribution or 'not installed'}); uninstall or disable one of them")
        self.components[info.kind][info.name] = info

    def names(self, kind: str) -> list[str]:
        return sorted(self.components[kind])

    def get(self, kind: str, name: str, *, where: str | None = None, source: str | None = None) -> ComponentInfo:
        found = self.components[kind].get(name)
        if found is not None:
            return found
        names = self.names(kind)
        close = difflib.get_close_matches(str(name), names, n=1, cutoff=0.5)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise RecipeError(f"unknown {SINGULAR[kind]} {name!r}; {hint}available: {', '.join(names) or 'none'} "
                          f"(see `calibrate plugins`)", source=source, where=where)

    def all(self) -> list[ComponentInfo]:
        return [info for kind in NAMES for _, info in sorted(self.components[kind].items())]
