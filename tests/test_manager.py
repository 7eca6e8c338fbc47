"""Plugin manager and registry: entry points, the autoload switch, misspelled hooks, duplicate
names, and the hook documentation in docs/plugins.md."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import subprocess
import sys
import textwrap
import types
from importlib import metadata
from pathlib import Path

import pytest

from calibrate.contract import hookspecs
from calibrate.contract.base import Estimator
from calibrate.errors import PluginError
from calibrate.contract.hookspecs import hookimpl
from calibrate.contract.manager import DISABLE_ENV, OWN_DISTRIBUTION, build_registry

ROOT = Path(__file__).resolve().parents[1]

PLUGIN_SOURCE = '''
from calibrate.contract.hookspecs import hookimpl
from calibrate_builtins.estimators.interp import ClassInterp


class {cls}(ClassInterp):
    """A third-party estimator for the tests."""


@hookimpl
def {hook}(register):
    register("{name}", {cls})
'''


def install_fake_distribution(site: Path, dist: str, module: str, source: str, version: str = "1.2.3") -> None:
    """A module plus a .dist-info declaring it in the entry-point group `calibrate`, as pip would leave it."""
    (site / f"{module}.py").write_text(source, encoding="utf-8")
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[calibrate]\n{module} = {module}\n", encoding="utf-8")


@pytest.fixture
def site(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv(DISABLE_ENV, raising=False)
    yield tmp_path
    for name in [m for m in sys.modules if m.startswith("thirdparty_")]:
        del sys.modules[name]
    importlib.invalidate_caches()


def _estimator_plugin(name: str, hook: str = "calibrate_register_estimators", cls: str = "Extra"):
    """A small plugin object (a module built in memory) registering one estimator."""
    mod = types.ModuleType(f"plugin_{name.replace('-', '_')}_{hook}")
    exec(PLUGIN_SOURCE.format(cls=cls, hook=hook, name=name), mod.__dict__)  # noqa: S102 - test fixture code
    return mod


# ---- discovery and the autoload switch -------------------------------------------------------

def test_builtins_come_from_the_own_distribution_with_its_version():
    registry = build_registry()
    info = registry.get("estimators", "class-interp")
    assert info.distribution == OWN_DISTRIBUTION
    assert info.version == metadata.version(OWN_DISTRIBUTION)
    assert info.plugin == "builtins"


def test_third_party_entry_point_is_loaded_with_its_origin(site):
    install_fake_distribution(site, "thirdparty-one", "thirdparty_one",
                              PLUGIN_SOURCE.format(cls="One", hook="calibrate_register_estimators", name="one-est"))
    info = build_registry().get("estimators", "one-est")
    assert (info.distribution, info.version) == ("thirdparty-one", "1.2.3")
    assert info.plugin == "thirdparty-one:thirdparty_one"


@pytest.mark.parametrize("value, loaded", [("1", False), ("true", False), ("0", True), ("", True)])
def test_autoload_switch_skips_third_party_entry_points_only(site, monkeypatch, value, loaded):
    install_fake_distribution(site, "thirdparty-two", "thirdparty_two",
                              PLUGIN_SOURCE.format(cls="Two", hook="calibrate_register_estimators", name="two-est"))
    monkeypatch.setenv(DISABLE_ENV, value)
    names = build_registry().names("estimators")
    assert ("two-est" in names) is loaded
    assert "class-interp" in names  # built-ins always load


def test_autoload_switch_does_not_even_import_the_plugin(site, monkeypatch):
    install_fake_distribution(site, "thirdparty-broken", "thirdparty_broken", "raise ImportError('boom')\n")
    monkeypatch.setenv(DISABLE_ENV, "1")
    build_registry()  # would fail if the broken module were imported
    monkeypatch.setenv(DISABLE_ENV, "0")
    with pytest.raises(PluginError) as err:
        build_registry()
    msg = str(err.value)
    assert "thirdparty-broken" in msg and "boom" in msg and DISABLE_ENV in msg


def test_registry_is_built_on_demand_not_at_import():
    code = "import sys, calibrate, calibrate.cli.commands, calibrate.recipe.validation; print('calibrate_builtins' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "False"


def test_each_registry_is_independent():
    a, b = build_registry(), build_registry(extra_plugins=(_estimator_plugin("only-in-b"),))
    assert "only-in-b" in b.names("estimators") and "only-in-b" not in a.names("estimators")
    assert "only-in-b" not in build_registry().names("estimators")


# ---- loud failures ----------------------------------------------------------------------------

def test_misspelled_hook_implementation_fails_loudly():
    plugin = _estimator_plugin("typo-est", hook="calibrate_register_estimator")
    with pytest.raises(PluginError) as err:
        build_registry(extra_plugins=(plugin,))
    msg = str(err.value)
    assert "calibrate_register_estimator" in msg and plugin.__name__ in msg
    assert "calibrate_register_estimators" in msg  # the hooks that exist are listed


def test_misspelled_hook_in_an_installed_plugin_fails_loudly(site):
    install_fake_distribution(site, "thirdparty-typo", "thirdparty_typo",
                              PLUGIN_SOURCE.format(cls="Typo", hook="calibrate_register_estimatorz", name="typo"))
    with pytest.raises(PluginError, match="calibrate_register_estimatorz"):
        build_registry()


def test_two_plugins_registering_one_name_is_an_error_naming_both():
    first, second = _estimator_plugin("same-name"), _estimator_plugin("same-name", cls="Other")
    second.__name__ = "plugin_second"
    with pytest.raises(PluginError) as err:
        build_registry(extra_plugins=(first, second))
    msg = str(err.value)
    assert "'same-name'" in msg and first.__name__ in msg and "plugin_second" in msg and "registered twice" in msg


def test_shadowing_a_builtin_is_an_error_naming_both(site):
    install_fake_distribution(site, "thirdparty-shadow", "thirdparty_shadow",
                              PLUGIN_SOURCE.format(cls="Shadow", hook="calibrate_register_estimators", name="class-interp"))
    with pytest.raises(PluginError) as err:
        build_registry()
    msg = str(err.value)
    assert "'builtins'" in msg and OWN_DISTRIBUTION in msg and "thirdparty-shadow" in msg


def test_registering_a_non_component_is_an_error():
    class NotAnEstimator:
        pass

    class Plugin:
        @hookimpl
        def calibrate_register_estimators(self, register):
            register("bad", NotAnEstimator)

    with pytest.raises(PluginError, match="not a subclass of calibrate.contract.base.Estimator"):
        build_registry(extra_plugins=(Plugin(),))


def test_registering_a_component_with_kwargs_is_a_plugin_error():
    class Loose(Estimator):
        model_class = None

        def __init__(self, **options):
            self.options = options

        def _fit(self, impostors, context):
            raise NotImplementedError

    class Plugin:
        @hookimpl
        def calibrate_register_estimators(self, register):
            register("loose", Loose)

    with pytest.raises(PluginError, match=r"loose.*\*\*kwargs"):
        build_registry(extra_plugins=(Plugin(),))


# ---- every hook is documented -----------------------------------------------------------------

def _hookspecs() -> dict[str, list[str]]:
    specs = {}
    for name, fn in inspect.getmembers(hookspecs, inspect.isfunction):
        if hasattr(fn, "calibrate_spec"):
            specs[name] = list(inspect.signature(fn).parameters)
    return specs


def _doc_places(doc: str, hook: str) -> list[str]:
    """The heading sections and table rows of docs/plugins.md that name ``hook``."""
    places = []
    lines = doc.splitlines()
    for i, line in enumerate(lines):
        if hook not in line:
            continue
        heading = re.match(r"^(#+)\s", line)
        if heading:
            level = len(heading.group(1))
            body = [line]
            for nxt in lines[i + 1:]:
                m = re.match(r"^(#+)\s", nxt)
                if m and len(m.group(1)) <= level:
                    break
                body.append(nxt)
            places.append("\n".join(body))
        elif line.lstrip().startswith("|"):
            places.append(line)
    return places


def test_hookspecs_are_found():
    assert set(_hookspecs()) >= {"calibrate_register_datasets", "calibrate_register_distances",
                                 "calibrate_register_transforms", "calibrate_register_estimators",
                                 "calibrate_register_evaluators"}


@pytest.mark.parametrize("hook", sorted(_hookspecs()))
def test_every_hookspec_is_documented_with_its_parameters(hook):
    doc = (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8")
    places = _doc_places(doc, hook)
    assert places, f"hook {hook} is not documented in docs/plugins.md: add a heading or a table row for it"
    params = _hookspecs()[hook]
    assert any(all(f"`{p}`" in place or f"({p})" in place for p in params) for place in places), \
        f"docs/plugins.md names {hook} but not its parameter(s) {params} in the same section or table row"


def test_hookspec_module_has_no_undocumented_functions():
    tree = ast.parse((ROOT / "calibrate" / "contract" / "hookspecs.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            assert ast.get_docstring(node), f"hook spec {node.name} has no docstring"
            assert ":param register:" in textwrap.dedent(ast.get_docstring(node)), f"{node.name}: document `register`"


def test_a_component_without_a_constructor_has_no_parameters():
    from calibrate.contract.base import Transform
    from calibrate.contract.params import param_specs

    class Halve(Transform):
        accepts = ("distance",)

        def _apply(self, values, kind):
            return values / 2

    class Plugin:
        @hookimpl
        def calibrate_register_transforms(self, register):
            register("halve", Halve)

    registry = build_registry(extra_plugins=(Plugin(),))
    info = registry.get("transforms", "halve")
    assert info.params == [] and param_specs(Halve) == []
    assert Halve().get_params() == {} and repr(Halve()) == "Halve()"


# ---- names, unmarked hooks, blocking one plugin (issue 21, item 5) --------------------------------

@pytest.mark.parametrize("name", ["Adaptive_ZNorm", "adaptive_znorm", "ZNORM", "-znorm", "znorm-", "z--norm", "z norm",
                                  "x" * 41, "1znorm"])
def test_component_names_follow_the_pattern(name):
    with pytest.raises(PluginError, match="lower-case words of letters and digits joined by hyphens"):
        build_registry(extra_plugins=(_estimator_plugin(name),))


def test_a_good_name_is_accepted():
    assert "adaptive-znorm2" in build_registry(extra_plugins=(_estimator_plugin("adaptive-znorm2"),)).names("estimators")


def test_a_hook_function_without_hookimpl_is_warned_about():
    plugin = types.ModuleType("plugin_unmarked")
    exec(PLUGIN_SOURCE.format(cls="Unmarked", hook="calibrate_register_estimators", name="unmarked")
         .replace("@hookimpl\n", ""), plugin.__dict__)  # noqa: S102 - test fixture code
    with pytest.warns(UserWarning, match=r"plugin_unmarked.*calibrate_register_estimators.*not marked @hookimpl"):
        registry = build_registry(extra_plugins=(plugin,))
    assert "unmarked" not in registry.names("estimators")


def test_one_plugin_can_be_blocked_by_name(site, monkeypatch):
    from calibrate.contract.manager import BLOCK_ENV

    for dist, module, cls, name in (("thirdparty-a", "thirdparty_a", "A", "a-est"), ("thirdparty-b", "thirdparty_b", "B", "b-est")):
        install_fake_distribution(site, dist, module, PLUGIN_SOURCE.format(cls=cls, hook="calibrate_register_estimators",
                                                                           name=name))
    monkeypatch.setenv(BLOCK_ENV, "thirdparty-a")  # by distribution
    names = build_registry().names("estimators")
    assert "a-est" not in names and "b-est" in names and "auto" in names
    monkeypatch.setenv(BLOCK_ENV, " thirdparty_b ,")  # by entry-point name
    names = build_registry().names("estimators")
    assert "a-est" in names and "b-est" not in names
    monkeypatch.setenv(BLOCK_ENV, "builtins")
    with pytest.raises(PluginError, match="built-in plugins"):
        build_registry()
