"""The core owns the world (docs/architecture.md, "Layers and the public API"):

(a) the core (``calibrate/``) never imports a built-in plugin (``calibrate_builtins``), not even
    inside a function or by name through importlib;
(b) a built-in imports only the core modules in ``calibrate.PUBLIC_MODULES`` (a listed package
    includes its submodules), exactly as a third-party plugin may;
(c) the import graph of both packages has no cycle.

The graph is read from the source with ``ast``, not by importing: every ``import`` and ``from ...
import`` anywhere in a file counts (inside functions, under ``if TYPE_CHECKING:``), relative imports
are resolved, and ``from pkg import name`` is an edge to ``pkg.name`` when that is a module, else to
``pkg`` itself (so ``from . import __version__`` in a core module is an edge to the package
``calibrate``, whose __init__ imports the library API). Importing ``a.b`` is an edge to ``a.b`` only:
the parent package's __init__ is not counted, or every module would sit in a cycle with its package.
"""

from __future__ import annotations

import ast
import functools
import textwrap
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import calibrate

ROOT = Path(__file__).resolve().parents[1]
CORE, BUILTINS = "calibrate", "calibrate_builtins"
#: package name -> its folder, relative to the repository root
PACKAGES = {CORE: Path("calibrate"), BUILTINS: Path("plugins") / "calibrate_builtins"}


@dataclass(frozen=True)
class Edge:
    source: str   # importing module
    target: str   # imported module of the two packages (after resolution)
    name: str     # the name as written (absolute), e.g. calibrate_builtins.datasets.score_list
    path: Path
    line: int

    def where(self) -> str:
        return f"{self.path}:{self.line}"


def find_modules(root: Path) -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, is a package's __init__) for every .py file of both packages."""
    modules = {}
    for package, folder in PACKAGES.items():
        for path in sorted((root / folder).rglob("*.py")):
            parts = [package, *path.relative_to(root / folder).with_suffix("").parts]
            is_package = parts[-1] == "__init__"
            if is_package:
                parts.pop()
            modules[".".join(parts)] = (path, is_package)
    return modules


def _imported_names(node: ast.AST, module: str, is_package: bool) -> list[str]:
    """Absolute dotted names one AST node imports (``pkg.name`` candidates for ``from pkg import name``)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        if node.level:
            base = module.split(".") if is_package else module.split(".")[:-1]
            base = base[:len(base) - (node.level - 1)]
            prefix = ".".join(base + ([node.module] if node.module else []))
        else:
            prefix = node.module or ""
        return [prefix] + [f"{prefix}.{alias.name}" for alias in node.names if alias.name != "*"]
    if (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)):
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if called in ("import_module", "__import__"):  # importlib.import_module("pkg.mod"), by name
            return [node.args[0].value]
    return []


def _resolve(name: str, modules: dict) -> str | None:
    """The longest prefix of ``name`` that is one of the modules, or None (numpy, typing, ...)."""
    parts = name.split(".")
    while parts:
        if ".".join(parts) in modules:
            return ".".join(parts)
        parts.pop()
    return None


def import_graph(root: Path) -> tuple[dict[str, tuple[Path, bool]], list[Edge]]:
    modules = find_modules(root)
    edges = []
    for module, (path, is_package) in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        rel = path.relative_to(root)
        for node in ast.walk(tree):
            names = _imported_names(node, module, is_package)
            if not names:
                continue
            if isinstance(node, ast.ImportFrom):
                # from pkg import a, b: pkg.a when it is a module, else pkg (a name defined in pkg/__init__)
                prefix, members = names[0], names[1:]
                found = [m for m in members if m in modules]
                if len(found) < len(members) or not members:
                    found.append(prefix)
                names = found
            for name in names:
                target = _resolve(name, modules)
                if name.split(".")[0] in PACKAGES and target is None:
                    target = name  # a module that does not exist (yet): still an import of that package
                if target is not None and target != module:
                    edges.append(Edge(module, target, name, rel, node.lineno))
    return modules, sorted(edges, key=lambda e: (str(e.path), e.line, e.target))


def _top(name: str) -> str:
    return name.split(".")[0]


def core_imports_of_builtins(edges: list[Edge]) -> list[str]:
    return [f"{e.where()}: core module {e.source} imports the built-in {e.name} (the core never imports a plugin; "
            "move what it needs into the core and let the plugin import it from there)"
            for e in edges if _top(e.source) == CORE and _top(e.name) == BUILTINS]


def _public(name: str, public: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in public)


def private_core_imports(edges: list[Edge], public: tuple[str, ...]) -> list[str]:
    return [f"{e.where()}: built-in {e.source} imports {e.target}, which is not in calibrate.PUBLIC_MODULES "
            f"(import it from a public module, or make a deliberate public entry for it)"
            for e in edges if _top(e.source) == BUILTINS and _top(e.target) == CORE and not _public(e.target, public)]


def _strongly_connected(nodes, succ) -> list[list[str]]:
    """Tarjan's algorithm, iterative; components of more than one module."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = 0
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(succ[start]))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(succ[w])))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def _one_cycle(component: list[str], first: dict) -> list[Edge]:
    """A shortest cycle through the component's first module, as the edges that make it."""
    inside = set(component)
    start = component[0]
    came: dict[str, Edge] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w, edge in first[v].items():
                if w not in inside:
                    continue
                if w == start:
                    path = [edge]
                    while path[0].source != start:
                        path.insert(0, came[path[0].source])
                    return path
                if w not in came:
                    came[w] = edge
                    nxt.append(w)
        frontier = nxt
    raise AssertionError("a strongly connected component without a cycle")


def import_cycles(modules: dict, edges: list[Edge]) -> list[str]:
    first: dict[str, dict[str, Edge]] = defaultdict(dict)  # source -> target -> its first import line
    for e in edges:
        if e.target in modules:
            first[e.source].setdefault(e.target, e)
    succ = {m: sorted(first[m]) for m in modules}
    out = []
    for component in _strongly_connected(sorted(modules), succ):
        cycle = _one_cycle(component, first)
        steps = " -> ".join(f"{e.target} ({e.where()})" for e in cycle)
        out.append(f"import cycle among {len(component)} modules ({', '.join(component)}); one cycle: "
                   f"{cycle[0].source} -> {steps}")
    return out


@functools.lru_cache(maxsize=None)
def _repository_graph() -> tuple[dict[str, tuple[Path, bool]], list[Edge]]:
    """The repository's graph, parsed once for the four tests that read it (1.8 s each)."""
    return import_graph(ROOT)


def check(root: Path, public: tuple[str, ...]) -> dict[str, list[str]]:
    modules, edges = _repository_graph() if root == ROOT else import_graph(root)
    return {"core imports a built-in": core_imports_of_builtins(edges),
            "built-in imports a non-public core module": private_core_imports(edges, public),
            "cycle": import_cycles(modules, edges)}


# ---- the repository ------------------------------------------------------------------------------

def _say(problems: list[str]) -> str:
    return "\n" + "\n".join(problems)


def test_the_core_imports_no_builtin():
    problems = check(ROOT, calibrate.PUBLIC_MODULES)["core imports a built-in"]
    assert not problems, _say(problems)


def test_builtins_import_only_the_public_core_modules():
    problems = check(ROOT, calibrate.PUBLIC_MODULES)["built-in imports a non-public core module"]
    assert not problems, _say(problems)


def test_the_import_graph_has_no_cycle():
    problems = check(ROOT, calibrate.PUBLIC_MODULES)["cycle"]
    assert not problems, _say(problems)


def test_every_public_module_exists_and_stays_clear_of_the_run():
    """A public module (what a plugin, hence a worker, imports) never reaches the pipeline."""
    modules, edges = _repository_graph()
    assert not [p for p in calibrate.PUBLIC_MODULES if p not in modules], "PUBLIC_MODULES names a missing module"
    succ = defaultdict(set)
    for e in edges:
        succ[e.source].add(e.target)
    for public in calibrate.PUBLIC_MODULES:
        seen, todo = set(), [m for m in modules if _public(m, (public,))]
        while todo:
            m = todo.pop()
            if m not in seen:
                seen.add(m)
                todo.extend(succ[m])
        assert "calibrate.running.pipeline" not in seen and not any(_top(m) == BUILTINS for m in seen), public


# ---- the checks themselves find what they are for ----------------------------------------------------

def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return root


CLEAN = {
    "calibrate/__init__.py": "from .api import run\n",
    "calibrate/version.py": "__version__ = '1'\n",
    "calibrate/errors.py": "class CalibrateError(Exception): ...\n",
    "calibrate/base.py": "from .errors import CalibrateError\n",
    "calibrate/outputs.py": "import json\nfrom .errors import CalibrateError\n\n\ndef write():\n    from .version import __version__\n",
    "calibrate/api.py": "from .outputs import write\nfrom . import base\n\n\ndef run():\n    pass\n",
    "plugins/calibrate_builtins/__init__.py": "from .datasets import register\n",
    "plugins/calibrate_builtins/datasets/__init__.py": "def register():\n    from .scores import Scores\n",
    "plugins/calibrate_builtins/datasets/scores.py": "import numpy\nfrom calibrate.base import CalibrateError\n",
    "plugins/calibrate_builtins/evaluators/__init__.py": "",
    "plugins/calibrate_builtins/evaluators/fpr.py": "from ..datasets import scores\n",
}
PUBLIC = ("calibrate.base", "calibrate.errors")


def test_a_clean_tree_passes(tmp_path):
    assert check(_tree(tmp_path, CLEAN), PUBLIC) == {"core imports a built-in": [],
                                                     "built-in imports a non-public core module": [], "cycle": []}


def test_planted_violations_are_found_with_module_and_line(tmp_path):
    bad = dict(CLEAN)
    # a cycle through the package: outputs imports a name of calibrate/__init__, which imports api -> outputs
    bad["calibrate/outputs.py"] = "import json\n\n\ndef write():\n    from . import __version__\n"
    # the core importing a built-in, inside a function, and by name
    bad["calibrate/cli.py"] = ("import importlib\n\n\ndef accept():\n"
                               "    from calibrate_builtins.datasets.scores import Scores\n"
                               "    importlib.import_module('calibrate_builtins.evaluators.fpr')\n")
    # a built-in importing core internals, and a cycle among built-ins through relative imports
    bad["plugins/calibrate_builtins/datasets/scores.py"] = ("from calibrate.base import CalibrateError\n"
                                                            "from calibrate.outputs import write\n"
                                                            "from calibrate import run\n\n\n"
                                                            "def helper():\n    from ..evaluators.fpr import x\n")
    found = check(_tree(tmp_path, bad), PUBLIC)

    core = found["core imports a built-in"]
    assert len(core) == 2 and all("core module calibrate.cli imports the built-in" in p for p in core)
    assert "calibrate/cli.py:5:" in core[0] and "calibrate_builtins.datasets.scores" in core[0]
    assert "calibrate/cli.py:6:" in core[1] and "calibrate_builtins.evaluators.fpr" in core[1]

    private = found["built-in imports a non-public core module"]
    assert len(private) == 2
    assert "datasets/scores.py:2: built-in calibrate_builtins.datasets.scores imports calibrate.outputs" in private[0]
    assert "datasets/scores.py:3: built-in calibrate_builtins.datasets.scores imports calibrate," in private[1]

    cycles = found["cycle"]
    assert len(cycles) == 2, cycles
    core_cycle = next(c for c in cycles if "calibrate.outputs" in c)
    assert "calibrate, calibrate.api, calibrate.outputs" in core_cycle
    assert "calibrate -> calibrate.api (calibrate/__init__.py:1) -> calibrate.outputs (calibrate/api.py:1)" in core_cycle
    assert "-> calibrate (calibrate/outputs.py:5)" in core_cycle
    plugin_cycle = next(c for c in cycles if "calibrate_builtins.evaluators.fpr" in c)
    assert "datasets/scores.py:7)" in plugin_cycle and "evaluators/fpr.py:1)" in plugin_cycle


def test_relative_imports_resolve_to_submodules_or_to_the_package(tmp_path):
    modules, edges = import_graph(_tree(tmp_path, {
        **CLEAN,
        "calibrate/testing/__init__.py": "from . import checks\nfrom ..base import CalibrateError\n",
        "calibrate/testing/checks.py": "from . import KIND_CHECKS\nfrom .. import errors\n",
    }))
    got = {(e.source, e.target) for e in edges}
    assert ("calibrate.testing", "calibrate.testing.checks") in got       # a submodule
    assert ("calibrate.testing", "calibrate.base") in got
    assert ("calibrate.testing.checks", "calibrate.testing") in got       # a name of the package's __init__
    assert ("calibrate.testing.checks", "calibrate.errors") in got
    assert ("calibrate.api", "calibrate.base") in got and ("calibrate.api", "calibrate") not in got


# ---- the core's rooms: packages, their order, their size (issue 33) ----------------------------------

def layer_of(module: str, layers: tuple) -> int | None:
    """The index of the layer a core module belongs to (its package's, or its own for a top-level module)."""
    for k, layer in enumerate(layers):
        if any(module == p or module.startswith(p + ".") for p in layer):
            return k
    return None


def layer_violations(modules: dict, edges: list[Edge], layers: tuple) -> list[str]:
    """Every import of a later layer by an earlier one, and every core module no layer names. The package
    ``calibrate`` itself (its __init__: the tables PUBLIC_MODULES, LAYERS, FORMER_NAMES and entry points that
    load on first use) counts as the first layer, so it may import only that layer and any module may read it."""
    out = [f"core module {m} is in no layer of calibrate.LAYERS (add its package there)"
           for m in modules if _top(m) == CORE and m != CORE and layer_of(m, layers) is None]
    for e in edges:
        if _top(e.source) != CORE or _top(e.target) != CORE:
            continue
        source = 0 if e.source == CORE else layer_of(e.source, layers)
        target = 0 if e.target == CORE else layer_of(e.target, layers)
        if source is not None and target is not None and target > source:
            out.append(f"{e.where()}: {e.source} (layer {source}: {', '.join(layers[source])}) imports {e.target} "
                       f"(layer {target}: {', '.join(layers[target])}), a later layer (calibrate.LAYERS): move what it "
                       "needs down, or the importer up")
    return out


def package_cycles(modules: dict, edges: list[Edge]) -> list[list[str]]:
    """Cycles in the graph of the core's packages (a top-level module counts as its own package)."""
    def package(m: str) -> str:
        parts = m.split(".")
        return ".".join(parts[:2])
    nodes = sorted({package(m) for m in modules if _top(m) == CORE})
    succ = {n: set() for n in nodes}
    for e in edges:
        if _top(e.source) == CORE and _top(e.target) == CORE and e.target in modules:
            a, b = package(e.source), package(e.target)
            if a != b:
                succ[a].add(b)
    return _strongly_connected(nodes, {n: sorted(s) for n, s in succ.items()})


#: the issue's bounds: a reader finds a thing from folder names, and holds a module in their head
MAX_TOP_MODULES, MAX_LINES = 12, 600


def test_the_core_keeps_its_layers():
    modules, edges = _repository_graph()
    problems = layer_violations(modules, edges, calibrate.LAYERS)
    assert not problems, _say(problems)


def test_no_cycle_between_core_packages():
    modules, edges = _repository_graph()
    assert not package_cycles(modules, edges)


def test_every_core_package_says_what_it_holds_and_may_import():
    for folder in sorted(p.parent for p in (ROOT / "calibrate").glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse((folder / "__init__.py").read_text(encoding="utf-8")))
        assert doc and len(doc.split()) >= 15, f"{folder.name}/__init__.py opens with no docstring saying what it holds"
        if folder.name != "testing":
            assert "May import" in doc, f"{folder.name}/__init__.py does not say what the package may import"


def test_few_modules_at_the_top_and_none_too_long():
    top = sorted(p.name for p in (ROOT / "calibrate").glob("*.py"))
    assert len(top) <= MAX_TOP_MODULES, f"{len(top)} modules directly under calibrate/: {top}"
    long = [f"{p.relative_to(ROOT)}: {n} lines" for folder in ("calibrate", "plugins") for p in sorted((ROOT / folder).rglob("*.py"))
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES]
    assert not long, _say(long)


LAYERED = {
    "calibrate/__init__.py": "from .version import __version__\n",
    "calibrate/version.py": "__version__ = '1'\n",
    "calibrate/errors.py": "class CalibrateError(Exception): ...\n",
    "calibrate/files/__init__.py": "",
    "calibrate/files/reading.py": "from calibrate.errors import CalibrateError\n",
    "calibrate/contract/__init__.py": "",
    "calibrate/contract/base.py": "from calibrate.files.reading import CalibrateError\n",
    "calibrate/running/__init__.py": "",
    "calibrate/running/pipeline.py": "from calibrate.contract.base import CalibrateError\n",
}
LAYERS = (("calibrate.errors", "calibrate.version"), ("calibrate.files",), ("calibrate.contract",), ("calibrate.running",))


def test_layer_checks_find_what_they_are_for(tmp_path):
    modules, edges = import_graph(_tree(tmp_path / "clean", LAYERED))
    assert layer_violations(modules, edges, LAYERS) == [] and package_cycles(modules, edges) == []
    bad = dict(LAYERED)
    # a lower layer reaching up (inside a function too), a module of no layer, the package's __init__ reaching up
    bad["calibrate/files/reading.py"] = ("from calibrate.errors import CalibrateError\n\n\n"
                                         "def read():\n    from calibrate.running.pipeline import run\n")
    bad["calibrate/stray/__init__.py"] = ""
    bad["calibrate/__init__.py"] = "from .version import __version__\nfrom .contract.base import CalibrateError\n"
    modules, edges = import_graph(_tree(tmp_path / "bad", bad))
    problems = layer_violations(modules, edges, LAYERS)
    assert any(p.startswith("calibrate/files/reading.py:5: calibrate.files.reading (layer 1: calibrate.files) imports "
                            "calibrate.running.pipeline (layer 3") for p in problems), problems
    assert any("calibrate.stray is in no layer" in p for p in problems), problems
    assert any(p.startswith("calibrate/__init__.py:2: calibrate (layer 0: calibrate.errors, calibrate.version) imports "
                            "calibrate.contract.base (layer 2") for p in problems), problems
    assert ["calibrate.contract", "calibrate.files", "calibrate.running"] in package_cycles(modules, edges)


def architecture_map(text: str) -> set[str]:
    """The core's files named in docs/architecture.md's map ("Where things are"), as paths under calibrate/:
    a name at two spaces is directly under calibrate/, a deeper one in the package last named at two spaces."""
    block = text.split("## Where things are", 1)[1].split("```", 2)[1]
    named, package = set(), None
    for line in block.splitlines():
        stripped = line.lstrip(" ")
        indent, word = len(line) - len(stripped), stripped.split(" ", 1)[0]
        if line.startswith("plugins/"):
            break
        if indent == 2 and word.endswith("/"):
            package = word.rstrip("/")
        elif indent == 2 and word.endswith(".py"):
            named.add(word)
        elif indent > 2 and word.endswith(".py") and package:
            named.add(f"{package}/{word}")
    return named


def test_the_architecture_map_names_every_core_module():
    core = ROOT / "calibrate"
    modules = {str(p.relative_to(core)) for p in core.rglob("*.py")
               if p.parts[-2] != "testing" and not (p.name == "__init__.py" and p.parent != core)}
    named = architecture_map((ROOT / "docs" / "architecture.md").read_text(encoding="utf-8"))
    assert not sorted(modules - named), f"docs/architecture.md's map does not name {sorted(modules - named)}"
    assert not sorted(named - modules), f"docs/architecture.md's map names {sorted(named - modules)}, which do not exist"
