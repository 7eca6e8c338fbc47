"""Builds the plugin manager on demand: the built-ins, then the entry-point group ``calibrate``.

Nothing here runs at import time; call :func:`build_registry` (or :func:`get_plugin_manager`)
when components are needed. Set ``CALIBRATE_DISABLE_PLUGIN_AUTOLOAD=1`` to skip third-party
entry points (the built-ins are still loaded), or ``CALIBRATE_BLOCK_PLUGINS=a,b`` to skip the
named ones only (an entry point's name or its distribution's; pluggy's ``set_blocked``, as tox does).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import metadata
from types import ModuleType

import pluggy

from calibrate.contract import hookspecs
from calibrate.errors import PluginError
from calibrate.contract.kinds import KINDS, Kind
from calibrate.contract.registry import ComponentInfo, Registry

ENTRY_POINT_GROUP = "calibrate"
OWN_DISTRIBUTION = "calibrate-thresholds"
DISABLE_ENV = "CALIBRATE_DISABLE_PLUGIN_AUTOLOAD"
BLOCK_ENV = "CALIBRATE_BLOCK_PLUGINS"
HOOK_PREFIX = "calibrate_register_"


@dataclass(frozen=True)
class PluginOrigin:
    distribution: str | None
    version: str | None


def _autoload_disabled() -> bool:
    return os.environ.get(DISABLE_ENV, "").strip().lower() not in ("", "0", "false", "no")


def _blocked() -> set[str]:
    """The plugins ``CALIBRATE_BLOCK_PLUGINS`` names (comma-separated entry-point or distribution names)."""
    return {name.strip() for name in os.environ.get(BLOCK_ENV, "").split(",") if name.strip()}


def unmarked_hooks(plugin: object) -> list[str]:
    """Functions of ``plugin`` named like a hook (``calibrate_register_*``) but not marked ``@hookimpl``:
    pluggy ignores them, so they would register nothing, silently."""
    marker = f"{hookspecs.PROJECT}_impl"
    return sorted(name for name in dir(plugin) if name.startswith(HOOK_PREFIX)
                  and callable(getattr(plugin, name, None)) and not hasattr(getattr(plugin, name), marker))


class PluginManager:
    """Typed facade over pluggy (after tox 4's ``tox.plugin.manager``): the rest of calibrate asks
    it for components of a kind and never touches pluggy's hooks or hook implementations.

    Loads the built-ins and the entry-point group ``calibrate`` (third-party ones unless
    ``CALIBRATE_DISABLE_PLUGIN_AUTOLOAD`` is set), then ``extra_plugins`` (objects or modules with
    hook implementations, e.g. in tests), and checks that every hook implementation names a hook.
    """

    def __init__(self, extra_plugins: tuple[object | ModuleType, ...] = ()):
        self._pm = pluggy.PluginManager("calibrate")
        self._pm.add_hookspecs(hookspecs)
        self.origins: dict[str, PluginOrigin] = {}
        self._load_entry_points()
        for plugin in extra_plugins:
            self.register(plugin)
        try:
            self._pm.check_pending()
        except pluggy.PluginValidationError as exc:
            raise PluginError(f"{exc}; hook implementations must be named after a hook in calibrate.contract.hookspecs "
                              f"({', '.join(k.hook for k in KINDS)})") from exc

    def _load_entry_points(self) -> None:
        eps = sorted(metadata.entry_points(group=ENTRY_POINT_GROUP),
                     key=lambda ep: (ep.dist is None or ep.dist.name != OWN_DISTRIBUTION, ep.name))
        if not any(ep.dist is not None and ep.dist.name == OWN_DISTRIBUTION for ep in eps):
            raise PluginError("the built-in plugins are not registered: calibrate-thresholds is not installed "
                              "(run `pip install -e .` in the repository)")
        skip_third_party = _autoload_disabled()
        blocked = _blocked()
        for ep in eps:
            is_own = ep.dist is not None and ep.dist.name == OWN_DISTRIBUTION
            if skip_third_party and not is_own:
                continue
            if blocked & {ep.name, ep.dist.name if ep.dist else ""}:
                if is_own:
                    raise PluginError(f"{BLOCK_ENV} names the built-in plugins ({ep.name}); calibrate cannot run "
                                      "without them: block third-party plugins only")
                self._pm.set_blocked(f"{ep.dist.name if ep.dist else 'unknown'}:{ep.name}")
                continue
            try:
                plugin = ep.load()
            except Exception as exc:  # a broken third-party plugin must say who it is
                dist = ep.dist.name if ep.dist else "unknown distribution"
                raise PluginError(f"plugin {ep.name!r} from {dist} failed to import: {exc}; fix or uninstall it, "
                                  f"or set {DISABLE_ENV}=1 to skip third-party plugins") from exc
            name = ep.name if is_own else f"{ep.dist.name if ep.dist else 'unknown'}:{ep.name}"
            if self._pm.is_registered(plugin):
                continue
            self._warn_unmarked(plugin, name)
            self._pm.register(plugin, name=name)
            self.origins[name] = PluginOrigin(ep.dist.name if ep.dist else None, ep.dist.version if ep.dist else None)

    def register(self, plugin: object | ModuleType) -> str:
        """Register one more plugin object (not installed: no distribution); returns its name."""
        name = getattr(plugin, "__name__", None) or type(plugin).__name__
        self._warn_unmarked(plugin, name)
        self._pm.register(plugin, name=name)
        self.origins[name] = PluginOrigin(None, None)
        return name

    @staticmethod
    def _warn_unmarked(plugin: object, name: str) -> None:
        missing = unmarked_hooks(plugin)
        if missing:
            warnings.warn(f"plugin {name!r}: {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} named like a "
                          "hook but not marked @hookimpl (from calibrate.contract.hookspecs import hookimpl), so pluggy ignores "
                          "it and it registers nothing", stacklevel=3)

    def components(self, kind: Kind) -> Iterator[ComponentInfo]:
        """Every component of ``kind``, plugin by plugin in registration order; each hook call gets a
        ``register`` bound to its plugin, so the registry knows who registered what."""
        caller = getattr(self._pm.hook, kind.hook)
        for impl in reversed(caller.get_hookimpls()):  # pluggy lists them last-registered first
            origin = self.origins.get(impl.plugin_name, PluginOrigin(None, None))
            found: list[ComponentInfo] = []

            def register(name: str, factory: type, _found=found, _impl=impl, _origin=origin) -> None:
                _found.append(ComponentInfo(kind.name, name, factory, _impl.plugin_name, _origin.distribution,
                                            _origin.version))

            impl.function(register=register)
            yield from found

    def registry(self) -> Registry:
        """Every component of every kind, checked (base class, parameters, unique names)."""
        registry = Registry()
        for kind in KINDS:
            for info in self.components(kind):
                registry.add(info)
        return registry


def get_plugin_manager(extra_plugins: tuple[object, ...] = ()) -> PluginManager:
    """A fresh :class:`PluginManager` with built-ins, entry points, then ``extra_plugins``."""
    return PluginManager(extra_plugins)


def build_registry(extra_plugins: tuple[object | ModuleType, ...] = ()) -> Registry:
    """Ask every plugin to register its components; duplicates are errors naming both plugins."""
    return PluginManager(extra_plugins).registry()
