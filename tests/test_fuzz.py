"""Fuzzing the CLI with generated recipes and data files (hypothesis).

Every generated input must end in exit 0 (stderr: only `note:` lines) or exit 2 (stderr: exactly
one `error: ...` line, and no result file left in the output folder), never in a traceback
(exit 1), a hang or a partial result. The CLI is called in-process (typer's CliRunner) and the
data are tiny, so that an example costs tens of milliseconds.

Profiles: `calibrate-fuzz` (the default: few examples, derandomized so that CI is deterministic)
and `calibrate-fuzz-long` (CALIBRATE_FUZZ_PROFILE=long, CALIBRATE_FUZZ_EXAMPLES=N; random).
benchmarks/fuzz_long.py runs these properties with many examples and counts the outcomes.
"""

from __future__ import annotations

import collections
import copy
import csv
import hashlib
import io
import json
import os
import signal
import stat
import tempfile
import zlib
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from calibrate.cli.commands import app

_COMMON = dict(deadline=None, database=None, print_blob=True,
               phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],  # no slow "explain" phase
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("calibrate-fuzz", max_examples=int(os.environ.get("CALIBRATE_FUZZ_EXAMPLES", 20)),
                          derandomize=True, **_COMMON)
settings.register_profile("calibrate-fuzz-long", max_examples=int(os.environ.get("CALIBRATE_FUZZ_EXAMPLES", 2000)),
                          derandomize=False, **_COMMON)
FUZZ = settings.get_profile("calibrate-fuzz-long" if os.environ.get("CALIBRATE_FUZZ_PROFILE") == "long"
                            else "calibrate-fuzz")
#: seconds one CLI call may take before it counts as a hang
HANG_SECONDS = float(os.environ.get("CALIBRATE_FUZZ_TIMEOUT", 60))
RESULT_FILES = ("results.json", "thresholds.csv", "manifest.json")

#: (command, exit code) -> count, read by benchmarks/fuzz_long.py
OUTCOMES: collections.Counter = collections.Counter()
runner = CliRunner()


class Hang(BaseException):
    """A CLI call ran longer than HANG_SECONDS (BaseException: the CLI's handler must not swallow it)."""


@contextmanager
def _time_limit(seconds: float):
    if not hasattr(signal, "SIGALRM"):
        yield
        return

    def on_alarm(signum, frame):
        raise Hang(f"no answer after {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def invoke_and_check(recipe: Path, out: Path) -> int:
    """`validate` then `run` the recipe in-process; assert the exit-code contract of both."""
    with _time_limit(HANG_SECONDS):
        checked = runner.invoke(app, ["validate", str(recipe)])
    _check(checked, "validate", None)
    with _time_limit(HANG_SECONDS):
        result = runner.invoke(app, ["run", str(recipe), "--out", str(out), "--quiet"])
    _check(result, "run", out)
    if checked.exit_code == 2:
        assert result.exit_code == 2, f"validate refused the recipe but run accepted it:\n{checked.stderr}"
    return result.exit_code


def _check(result, command: str, out: Path | None) -> None:
    OUTCOMES[(command, result.exit_code)] += 1
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    if result.exit_code == 0:
        odd = [line for line in lines if not line.startswith("note: ")]
        assert not odd, f"{command}: exit 0 but stderr has lines other than notes: {odd}"
        if out is not None:
            assert (out / "results.json").is_file(), f"{command}: exit 0 without results.json in {out}"
        return
    assert result.exit_code == 2, (f"{command}: exit {result.exit_code} (expected 0 or 2)\n{result.stderr}"
                                   f"\n{result.exception!r}")
    assert len(lines) == 1 and lines[0].startswith("error: "), \
        f"{command}: exit 2 must print exactly one `error:` line, got {lines}"
    if out is not None:  # the output folder, and staging folders beside it (each example has its own parent)
        left = sorted(str(p.relative_to(out.parent)) for p in out.parent.rglob("*") if p.name in RESULT_FILES)
        assert not left, f"{command}: exit 2 but result files were left in or beside {out}: {left}"


# ---------------------------------------------------------------------------------------------
# recipes: a valid base, then deleted keys, wrong types, YAML anchors/aliases/tags, bad bytes

JUNK = [None, "", "x", "日本語", "Ünïcödé", -1, 0, 1, 2 ** 64, -(2 ** 70), 0.5, -0.5, 1e-300, float("inf"),
        float("-inf"), float("nan"), True, False, [], {}, [1, 2], [0.5, "a"], [[1, 2]], {"plugin": "nope"},
        {"plugin": None}, {"a": 1}, "../../nowhere", "identity", "class-interp", "similarity", "1/0"]
YAML_TOKENS = ["!!python/object:os.system {}", "!!python/object/apply:os.getcwd []", "!!python/name:os.system",
               "!!binary aGVsbG8=", "!!set {a, b}", "!!timestamp 2001-12-14", "*nowhere", "&a [*a]",
               "!!str 0.5", "!!float '1e-3'", "!!int '0x10'", "!!null ''", "!!bool yes", "{[1, 2]: 3}",
               "!custom 3", "[unclosed", "'quote", "@reserved", "\t0.1", ".nan", ".inf", "-.inf", "0x1F",
               "1_000", "0o17", "~", "|\n  literal", "!!map {? a}"]


def _paths(node, prefix=()):
    """Every (path, value) inside nested dicts/lists."""
    out = []
    if isinstance(node, dict):
        for k, v in node.items():
            out.append((prefix + (k,), v))
            out += _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out.append((prefix + (i,), v))
            out += _paths(v, prefix + (i,))
    return out


@st.composite
def mutated(draw, recipe: dict) -> dict:
    """The recipe with up to three random deletions, wrong-typed values or misspelt keys."""
    recipe = copy.deepcopy(recipe)  # its parts may be objects a strategy hands out again
    for _ in range(draw(st.sampled_from([0, 1, 1, 2, 3]))):
        paths = _paths(recipe)
        if not paths:
            break
        path, _ = draw(st.sampled_from(paths))
        parent = recipe
        for key in path[:-1]:
            parent = parent[key]
        key = path[-1]
        op = draw(st.sampled_from(["delete", "junk", "junk", "rename"]))
        if op == "delete":
            del parent[key]
        elif op == "junk":
            parent[key] = copy.deepcopy(draw(st.sampled_from(JUNK)))
        elif isinstance(parent, dict):
            parent[draw(st.sampled_from([f"{key}s", str(key).upper(), "", "é", str(key)[:-1] or "k"]))] = parent.pop(key)
    return recipe


@st.composite
def recipe_bytes(draw, recipe: dict, damage: bool = True) -> bytes:
    """The YAML of a (mutated) recipe, sometimes with anchors, tags or undecodable bytes spliced in."""
    if not damage:
        return yaml.safe_dump(recipe, sort_keys=False, allow_unicode=True).encode("utf-8")
    recipe = draw(mutated(recipe))
    text = yaml.safe_dump(recipe, sort_keys=False, allow_unicode=True, default_flow_style=False)
    style = draw(st.sampled_from(["plain"] * 6 + ["token", "token", "anchor", "merge", "bytes", "whole", "dup"]))
    lines = text.splitlines()
    if style == "token":
        candidates = [i for i, line in enumerate(lines) if ": " in line or line.rstrip().endswith(":")]
        if candidates:
            i = draw(st.sampled_from(candidates))
            head = lines[i].split(":", 1)[0]
            lines[i] = f"{head}: {draw(st.sampled_from(YAML_TOKENS))}"
        text = "\n".join(lines) + "\n"
    elif style == "anchor" and isinstance(recipe.get("estimators"), list) and recipe["estimators"]:
        # the same estimator twice through an alias (two estimators labelled alike)
        first = yaml.safe_dump(recipe["estimators"][0], default_flow_style=True).strip()
        rest = {k: v for k, v in recipe.items() if k != "estimators"}
        text = yaml.safe_dump(rest, sort_keys=False, allow_unicode=True) + f"estimators:\n- &e {first}\n- *e\n"
    elif style == "merge" and isinstance(recipe.get("data"), dict):
        rest = {k: v for k, v in recipe.items() if k not in ("data", "transform")}
        data = yaml.safe_dump(recipe["data"], default_flow_style=True).strip()
        extra = draw(st.sampled_from(["{<<: *d}", "{<<: *d, kind: distance}", "*d", "{<<: [*d, *d]}"]))
        text = (f"data: &d {data}\ntransform: {extra}\n" + yaml.safe_dump(rest, sort_keys=False, allow_unicode=True))
    elif style == "dup":
        text = text + (lines[0] + "\n" if lines else "")
    elif style == "whole":
        text = draw(st.sampled_from(["", "---\n", "null\n", "[]\n", "42\n", "- data\n", "data:\n", "%YAML 1.1\n---\n{}",
                                     "version: 1\ndata: &a [*a]\n", "? [a, b]\n: c\n", "\ufeffversion: 1\n",
                                     "data: " + "[" * 400 + "]" * 400 + "\n",
                                     "data: {plugin: synthetic-patterns, classes: 3}\noutput: {dir: &d [*d]}\n"]))
    raw = text.encode("utf-8")
    if style == "bytes":
        at = draw(st.integers(0, len(raw)))
        raw = raw[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\x00", b"\xfe\xff", b"\x80abc"])) + raw[at:]
    return raw


#: the output folder (it does not exist yet; the parent is the example's own temporary folder)
OUT_NAMES = st.sampled_from(["out", "out", "ütf-8 out", "日本", "a/b/c", "out.d"])

#: (damage the recipe, damage the data): a quarter of the examples are clean, to reach the later stages
MODES = st.sampled_from([(False, False), (True, False), (False, True), (True, True)])


def estimators():
    cheap = st.sampled_from([{"plugin": "generic-interp"}, {"plugin": "class-interp"}])
    listed = st.lists(cheap, min_size=1, max_size=2, unique_by=lambda e: e["plugin"])
    # `auto` (named, or the default of a recipe without estimators) now and then, and the others on small grids
    others = st.lists(st.sampled_from(OTHER_ESTIMATORS), min_size=1, max_size=2, unique_by=lambda e: e["plugin"])
    return st.one_of(listed, listed, listed, listed, st.just([{"plugin": "auto"}]), st.just([]), others)


OTHER_ESTIMATORS = [{"plugin": "gpd-tail"}, {"plugin": "gpd-tail", "pooling": "shrunk", "method": "mle"},
                    {"plugin": "znorm", "pooled_shape": True}, {"plugin": "znorm", "family": "lognormal", "robust": True},
                    {"plugin": "shrinkage", "weight": "empirical-bayes", "bootstrap": 20},
                    {"plugin": "ncx2-grid", "dim": [2, 4], "sigma": {"steps": 10}},
                    {"plugin": "ncx2-grid", "dim": [1, 3], "mode": "fast", "score": "bhattacharyya"},
                    {"plugin": "ncx2-tail", "dim": [2, 3]},
                    {"plugin": "ncx2-cv", "windows": [[1, 2], [3, 4]], "cv_dims": 2, "sigma_steps": 8, "cv_sigma_steps": 6}]


def evaluation(patterns: bool):
    keys = {"targets": st.sampled_from([[0.05, 0.01], [0.1], [0.5, 0.2, 0.01], [0.001]])}
    if patterns:
        keys["enrollment"] = st.sampled_from(["staggered", 0, 1, -1, "1", "s0", "nope", 7])
        keys["rotate"] = st.booleans()
    return st.fixed_dictionaries({}, optional=keys)


# ---------------------------------------------------------------------------------------------
# score-matrix CSVs: ragged rows, NaN/inf cells, unicode labels, empty files, non-UTF-8 bytes

LABELS = ["a", "b", "c", "d", "Ünï", "日本", "a b", "a,b", 'q"t', "", " ", "1", "-1", "nan", "ok\u200b", "\u0000x",
          "two\nlines", "cr\rlf"]
CELLS = ["0.1", "0.2", "0.35", "0.5", "0.7", "0.9", "0", "1", "-1", "-0.3", "2.5", "nan", "inf", "-inf", "NaN",
         "1e308", "1e-320", "", " ", "x", "0,5", "１"]


@st.composite
def score_csv(draw, damage: bool = True) -> bytes:
    messy = damage and draw(st.booleans())
    if messy:
        gallery = draw(st.lists(st.sampled_from(LABELS), min_size=0, max_size=4))
    else:
        gallery = draw(st.lists(st.sampled_from(LABELS[:6]), min_size=1, max_size=4, unique=True))
    probes = [g for g in gallery for _ in range(draw(st.integers(1, 2)))] + ["outsider"] * draw(st.integers(0, 2))
    if messy:
        probes = draw(st.lists(st.sampled_from(gallery + LABELS) if gallery else st.sampled_from(LABELS), max_size=8))
    plain = st.sampled_from(CELLS[:7])
    rows = [[""] + gallery]
    for label in probes:
        width = len(gallery)
        if messy and draw(st.integers(0, 5)) == 0:  # ragged
            width = max(0, width + draw(st.sampled_from([-1, 1, 2])))
        rows.append([label] + [draw(plain) for _ in range(width)])
    if damage and len(rows) > 1 and len(rows[-1]) > 1 and draw(st.booleans()):  # one odd cell
        r = draw(st.integers(1, len(rows) - 1))
        if len(rows[r]) > 1:
            rows[r][draw(st.integers(1, len(rows[r]) - 1))] = draw(st.sampled_from(CELLS))
    buf = io.StringIO()
    csv.writer(buf).writerows(rows)
    raw = buf.getvalue().encode("utf-8")
    damage = draw(st.sampled_from(["none"] * 4 + ["empty", "truncate", "latin1", "bom", "nul", "gzip"])) if damage else ""
    if damage == "empty":
        raw = b""
    elif damage == "truncate":
        raw = raw[:draw(st.integers(0, len(raw)))]
    elif damage == "latin1":
        raw = raw.replace(b"a", b"\xe9", 1) + b"\xff\n"
    elif damage == "bom":
        raw = b"\xef\xbb\xbf" + raw
    elif damage == "nul":
        raw = raw.replace(b",", b",\x00", 1)
    elif damage == "gzip":
        raw = zlib.compress(raw)
    return raw


def _score_recipe(draw, kind: str, files: dict) -> dict:
    data = {"plugin": "score-matrix", "kind": kind, **files}
    extra = draw(st.fixed_dictionaries({}, optional={"missing": st.sampled_from([-1, 0, 2.5, None]),
                                                     "fit_fraction": st.sampled_from([0.5, 0.3, 0.9]),
                                                     "seed": st.sampled_from([0, 1, 12345])}))
    data.update(extra)
    if kind == "similarity":
        transform = draw(st.sampled_from([{"plugin": "similarity-to-distance", "upper": 1.0},
                                          {"plugin": "similarity-to-distance"},
                                          {"plugin": "similarity-to-distance", "method": "neg-log"}]))
    else:
        transform = draw(st.sampled_from([{"plugin": "identity"}, {"plugin": "neg-log-complement"},
                                          {"plugin": "shifted-logit", "clip": 0.001}]))
    return {"version": 1, "data": data, "transform": transform, "estimators": draw(estimators()),
            "evaluation": draw(evaluation(False)), "output": {"dir": "out-recipe", "plots": False}}


def _write(folder: Path, name: str, raw: bytes) -> Path:
    path = folder / name
    path.write_bytes(raw)
    return path


@FUZZ
@given(st.data())
def test_fuzz_score_matrix(data):
    bad_recipe, bad_data = data.draw(MODES)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if data.draw(st.booleans()):
            _write(tmp, "scores.csv", data.draw(score_csv(bad_data)))
            files = {"path": "scores.csv"}
        else:
            _write(tmp, "train.csv", data.draw(score_csv(bad_data)))
            _write(tmp, "test.csv", data.draw(score_csv(bad_data)))
            files = {"train": "train.csv", "test": "test.csv"}
        recipe = _score_recipe(data.draw, data.draw(st.sampled_from(["similarity", "distance"])), files)
        _write(tmp, "recipe.yaml", data.draw(recipe_bytes(recipe, bad_recipe)))
        invoke_and_check(tmp / "recipe.yaml", tmp / data.draw(OUT_NAMES))


# ---------------------------------------------------------------------------------------------
# pattern datasets: npz files and synthetic generators

PATTERN_VALUES = st.sampled_from([0.0, 1.0, -1.0, 0.25, 3.5, 1e300, -1e-300]) | st.floats(-10, 10, width=32)


@st.composite
def npz_bytes(draw, damage: bool = True) -> bytes:
    if damage:
        n = draw(st.integers(0, 12))
        d = draw(st.integers(0, 4))
        labels = np.array(draw(st.lists(st.sampled_from(["a", "b", "c", "日本", ""]), min_size=n, max_size=n)), dtype=str)
        sets = np.array(draw(st.lists(st.sampled_from(["1", "2", "3"]), min_size=n, max_size=n)), dtype=str)
    else:  # 2-5 classes of 2-3 sets of 1-2 samples
        k, m, per = draw(st.integers(2, 5)), draw(st.integers(2, 3)), draw(st.integers(1, 2))
        n, d = k * m * per, draw(st.integers(1, 3))
        labels = np.repeat(np.array(["a", "b", "日本", "d", "e"][:k]), m * per)
        sets = np.tile(np.repeat(np.array(["1", "2", "3"][:m]), per), k)
    X = np.array(draw(st.lists(PATTERN_VALUES, min_size=n * d, max_size=n * d)), dtype=np.float64).reshape(n, d)
    if damage and n * d and draw(st.integers(0, 3)) == 0:
        X.flat[draw(st.integers(0, n * d - 1))] = draw(st.sampled_from([np.nan, np.inf, -np.inf]))
    arrays = {"X": X, "labels": labels, "sets": sets}
    shape = "ok" if not damage else draw(st.sampled_from(["ok"] * 4 + ["drop", "1d", "3d", "short", "2dlabels", "strings", "ints",
                                               "complex", "bool", "bytes", "object", "scalar"]))
    if shape == "drop":
        arrays.pop(draw(st.sampled_from(sorted(arrays))))
    elif shape == "1d":
        arrays["X"] = X.ravel()
    elif shape == "3d":
        arrays["X"] = X[:, :, None]
    elif shape == "short":
        arrays["labels"] = labels[:-1]
    elif shape == "2dlabels":
        arrays["labels"] = labels[:, None]
    elif shape == "strings":
        arrays["X"] = X.astype(str)
    elif shape == "ints":
        arrays["labels"] = np.arange(n)
        arrays["sets"] = np.zeros(n, int)
    elif shape == "complex":
        arrays["X"] = X + 1j
    elif shape == "bool":
        arrays["X"] = X > 0
    elif shape == "bytes":
        arrays["labels"] = np.array([s.encode() for s in labels.tolist()], dtype=bytes) if n else np.array([], "S1")
    elif shape == "object":
        arrays["X"] = np.array([object()] * n, dtype=object)
    elif shape == "scalar":
        arrays["X"] = np.float64(1.0)
    buf = io.BytesIO()
    np.savez(buf, **arrays)  # an object array is pickled, which the reader must refuse
    raw = buf.getvalue()
    damage = draw(st.sampled_from(["none"] * 4 + ["empty", "truncate", "garbage"])) if damage else ""
    if damage == "empty":
        raw = b""
    elif damage == "truncate":
        raw = raw[:draw(st.integers(0, len(raw)))]
    elif damage == "garbage":
        raw = b"PK\x03\x04" + bytes(range(256))
    return raw


def _pattern_recipe(draw, data: dict) -> dict:
    distance = draw(st.sampled_from([{"plugin": "euclidean"}, {"plugin": "euclidean"},
                                     {"plugin": "mutual-subspace", "components": 1},
                                     {"plugin": "mutual-subspace", "components": 2, "normalize": False}]))
    return {"version": 1, "data": data, "distance": distance, "transform": {"plugin": "identity"},
            "estimators": draw(estimators()), "evaluation": draw(evaluation(True)),
            "output": {"dir": "out-recipe", "plots": False}}


@FUZZ
@given(st.data())
def test_fuzz_npz_patterns(data):
    bad_recipe, bad_data = data.draw(MODES)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        _write(tmp, "patterns.npz", data.draw(npz_bytes(bad_data)))
        recipe = _pattern_recipe(data.draw, {"plugin": "npz-patterns", "path": "patterns.npz"})
        _write(tmp, "recipe.yaml", data.draw(recipe_bytes(recipe, bad_recipe)))
        invoke_and_check(tmp / "recipe.yaml", tmp / data.draw(OUT_NAMES))


SMALL_INT = st.sampled_from([0, 1, 2, 3, -1, 10 ** 11])


@FUZZ
@given(st.data())
def test_fuzz_synthetic(data):
    bad_recipe, bad_data = data.draw(MODES)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if data.draw(st.booleans()):
            params = data.draw(st.fixed_dictionaries(
                {"classes": st.sampled_from([2, 3, 1, 0, -2])},
                optional={"sets": SMALL_INT, "samples": SMALL_INT, "dim": SMALL_INT, "seed": st.sampled_from([0, 1, -1]),
                          "noise": st.sampled_from([0.0, 0.3, -1.0, float("nan"), float("inf")]),
                          "set_shift": st.sampled_from([0.0, 1.0, float("nan")]),
                          "class_spread": st.sampled_from([0.0, 1.0, 1e308, float("inf")])}))
            recipe = _pattern_recipe(data.draw, {"plugin": "synthetic-patterns", **params})
        else:
            params = data.draw(st.fixed_dictionaries(
                {"classes": st.sampled_from([2, 3, 1, 0, -1, 2 ** 64]), "train": st.sampled_from([5, 1, 0, -1]),
                 "test": st.sampled_from([5, 1, 0, -1])},
                optional={"off_model": st.sampled_from([0.0, 1.0, 0.5, -0.1, 2.0, float("nan")]),
                          "round": st.sampled_from([None, 0, 1, -1, 400]), "seed": st.sampled_from([0, 3, -1])}))
            recipe = {"version": 1, "data": {"plugin": "synthetic-impostors", **params},
                      "estimators": data.draw(estimators()), "evaluation": data.draw(evaluation(False)),
                      "output": {"dir": "out-recipe", "plots": False}}
        _write(tmp, "recipe.yaml", data.draw(recipe_bytes(recipe, bad_recipe)))
        invoke_and_check(tmp / "recipe.yaml", tmp / data.draw(OUT_NAMES))


# ---------------------------------------------------------------------------------------------
# image-sets folders: corrupt, truncated or empty images, odd sizes, empty classes, one class


def _image(draw, size: tuple[int, int], damage: bool) -> tuple[str, bytes]:
    from PIL import Image

    fmt = draw(st.sampled_from(["png", "pgm", "jpg"]))
    mode = draw(st.sampled_from(["L", "L", "RGB", "I;16", "1", "RGBA"]))
    if fmt == "jpg" and mode not in ("L", "RGB"):
        mode = "L"
    if fmt == "pgm" and mode not in ("L", "I;16", "1"):
        mode = "L"
    seed = draw(st.integers(0, 2 ** 16))
    arr = np.random.default_rng(seed).integers(0, 256, (size[1], size[0]), dtype=np.uint8)
    im = Image.fromarray(arr, "L").convert(mode) if mode != "I;16" else Image.fromarray(arr.astype(np.uint16) * 257)
    buf = io.BytesIO()
    im.save(buf, format={"png": "PNG", "pgm": "PPM", "jpg": "JPEG"}[fmt])
    raw = buf.getvalue()
    damage = draw(st.sampled_from(["none"] * 4 + ["empty", "truncate", "garbage", "header-only"])) if damage else ""
    if damage == "empty":
        raw = b""
    elif damage == "truncate":
        raw = raw[:draw(st.integers(0, len(raw)))]
    elif damage == "garbage":
        raw = raw[:8] + bytes(draw(st.binary(min_size=0, max_size=40)))
    elif damage == "header-only":
        raw = raw[:min(len(raw), 20)]
    return fmt, raw


@st.composite
def image_tree(draw, root: Path, damage: bool = True) -> dict:
    """Writes root/<class>/[<set>/]<images>; returns the dataset's extra parameters."""
    root.mkdir()
    sizes = [(4, 4)] + ([(5, 3)] if damage and draw(st.integers(0, 3)) == 0 else [])
    flat = draw(st.integers(0, 3)) == 0
    names = draw(st.lists(st.sampled_from(["a", "b", "c", "Ünï", "日本", ".hidden", "s p", "new\nline"][:8 if damage else 5]),
                          min_size=0 if damage else 2, max_size=3 if damage else 5, unique=True))
    for cls in names:
        cdir = root / cls
        cdir.mkdir()
        set_dirs = [cdir] if flat else [cdir / s for s in draw(st.lists(st.sampled_from(["1", "2", "3", ".x"][:4 if damage else 3]),
                                                                        min_size=0 if damage else 2, max_size=3, unique=True))]
        for sdir in set_dirs:
            sdir.mkdir(exist_ok=True)
            for k in range(draw(st.integers(0 if damage else 2 if flat else 1, 3))):
                fmt, raw = _image(draw, draw(st.sampled_from(sizes)), damage)
                (sdir / f"img{k}.{fmt}").write_bytes(raw)
            if damage and draw(st.integers(0, 3)) == 0:
                (sdir / draw(st.sampled_from(["notes.txt", ".DS_Store", "x.PNG", "Thumbs.db", "bad\nname.png"]))).write_bytes(b"\xff\x00junk")
    if damage and draw(st.integers(0, 3)) == 0:
        (root / "README").write_text("loose file")
    params = {}
    if flat or draw(st.integers(0, 4)) == 0:
        params["flat_sets"] = draw(st.sampled_from([1, 2, 3, 0] if damage else [1, 2]))
    if len(sizes) > 1 and draw(st.booleans()):
        params["resize"] = draw(st.sampled_from([[4, 4], [2, 3], [0, 4], [4]]))
    if draw(st.integers(0, 4)) == 0:
        params["grayscale"] = False
    return params


@FUZZ
@given(st.data())
def test_fuzz_image_sets(data):
    bad_recipe, bad_data = data.draw(MODES)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        params = data.draw(image_tree(tmp / "images", bad_data))
        recipe = _pattern_recipe(data.draw, {"plugin": "image-sets", "path": "images", **params})
        _write(tmp, "recipe.yaml", data.draw(recipe_bytes(recipe, bad_recipe)))
        invoke_and_check(tmp / "recipe.yaml", tmp / data.draw(OUT_NAMES))


# ---------------------------------------------------------------------------------------------
# hostile cohorts at decision time: a normalised calibration given a damaged T-norm file

#: mutations of the T-norm file that must be refused (exit 2, one line): a probe's lines all equal, or equal up to a
#: rounding residue; scores near 1e300, NaN, too few members, negated or rescaled scores
HOSTILE_COHORTS = ("constant", "residue", "huge", "nan", "members", "negated", "scaled")
#: mutations a same-cohort evaluation can show (a failed comparison, rounding in the last digit): exit 0 expected
MILD_COHORTS = ("valid", "failed comparison", "jitter")


@pytest.fixture(scope="module")
def cohort_run(tmp_path_factory):
    """A snorm calibration over small score lists with cohort files (tests/cohort_lists.py), made once."""
    from cohort_lists import lists_recipe, write_lists

    folder = write_lists(tmp_path_factory.mktemp("cohort-run"))
    result = runner.invoke(app, ["run", str(lists_recipe(folder, "snorm")), "-q"])
    assert result.exit_code == 0, result.stderr
    return folder


@st.composite
def hostile_tnorm(draw, lines: list[list[str]]) -> tuple[str, list[list[str]]]:
    """(the mutation, the T-norm file's lines after it)."""
    kind = draw(st.sampled_from(HOSTILE_COHORTS + MILD_COHORTS))
    lines = [list(f) for f in lines]
    probes = sorted({f[2] for f in lines if "/eval" in f[2]})
    chosen = set(draw(st.lists(st.sampled_from(probes), min_size=1, max_size=4)))
    value = draw(st.floats(0.05, 0.95))
    factor = draw(st.sampled_from([50.0, 1e3]))
    jitter = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1))).choice([-1e-4, 0.0, 1e-4], len(lines))
    for i, f in enumerate(lines):
        if kind == "constant" and f[2] in chosen:
            f[3] = f"{value:.4f}"
        elif kind == "residue" and f[2] in chosen:
            f[3] = repr(float(np.nextafter(value, 1.0)) if i % 2 else value)
        elif kind == "huge":
            f[3] = repr(float(f[3]) * 1e300)
        elif kind == "negated":
            f[3] = repr(-float(f[3]))
        elif kind == "scaled":
            f[3] = repr(float(f[3]) * factor)
        elif kind == "jitter":
            f[3] = f"{float(f[3]) + jitter[i]:.4f}"
    if kind == "nan":
        lines[draw(st.integers(0, len(lines) - 1))][3] = draw(st.sampled_from(["nan", "inf", "-inf"]))
    elif kind == "members":
        members = sorted({f[0] for f in lines})
        keep = set(draw(st.lists(st.sampled_from(members), min_size=1, max_size=len(members) - 3)))
        lines = [f for f in lines if f[0] in keep]
    elif kind == "failed comparison":
        drop = draw(st.sampled_from([i for i, f in enumerate(lines) if f[2] in chosen]))
        lines = lines[:drop] + lines[drop + 1:]
    return kind, lines


@FUZZ
@given(st.data())
def test_fuzz_hostile_cohorts(cohort_run, data):
    """accept/evaluate --cohort with a damaged T-norm file: exit 2 with one line for every hostile mutation, exit 0
    only for a cohort a same-cohort evaluation could give, and then the FPR is the calibration's, not blown up."""
    folder = cohort_run
    good = [line.split() for line in (folder / "cohort-tnorm").read_text().splitlines()]
    kind, lines = data.draw(hostile_tnorm(good))
    command = data.draw(st.sampled_from(["accept", "evaluate"]))
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        cohort = tmp / "cohort"
        cohort.write_text("".join(" ".join(f) + "\n" for f in lines))
        args = [command, str(folder / "out"), str(folder / "scores-eval"), "--cohort", str(cohort)]
        args += ["--fpr", "0.05", "--out", str(tmp / "d.csv")] if command == "accept" else ["--json"]
        with _time_limit(HANG_SECONDS):
            result = runner.invoke(app, args)
        _check(result, command, None)
        if kind in HOSTILE_COHORTS:
            assert result.exit_code == 2, f"{kind}: a hostile cohort was used (exit 0):\n{result.stderr}"
            assert not (tmp / "d.csv").exists()
            return
        assert result.exit_code == 0, f"{kind}: a cohort a same-cohort evaluation gives was refused: {result.stderr}"
        if command == "accept":
            rows = list(csv.DictReader(open(tmp / "d.csv", encoding="utf-8")))
            impostor = [r["accept"] == "1" for r in rows if r["claimed"] != r["real"]]
        else:
            impostor = None
            fpr = json.loads(result.stdout)["targets"][0]["fpr"]
        rate = fpr if impostor is None else sum(impostor) / len(impostor)
        assert rate <= 0.15, f"{kind}: exit 0 with an FPR of {rate:.3f} at a 5% target"


# ---------------------------------------------------------------------------------------------
# regressions: inputs the fuzzer found that once ended in a traceback (exit 1)

SCORES = ",a,b,c\na,0.9,0.1,0.2\na,0.8,0.3,0.1\nb,0.2,0.9,0.3\nb,0.1,0.8,0.2\nc,0.3,0.2,0.9\nc,0.2,0.1,0.8\n"
SCORE_DATA = "data: {plugin: score-matrix, path: scores.csv}\ntransform: {plugin: similarity-to-distance, upper: 1.0}\n"
REGRESSIONS = {
    # `plugin:` given a list: TypeError unhashable type in the registry lookup
    "plugin-not-a-name": (SCORE_DATA.replace("upper: 1.0", "plugin: []").replace("{plugin: similarity-to-distance, ", "{"),
                          2, "transform.plugin"),
    # a YAML complex key (a list): TypeError in the duplicate-key check
    "unhashable-key": ("? [a, b]\n: c\n", 2, "a mapping key must be a plain name"),
    # a merge key `<<: *anchor` was refused as an unknown tag; own keys override merged ones
    "merge-key": (SCORE_DATA + "estimators:\n- &e {plugin: class-interp, name: one}\n- {<<: *e, name: two}\n"
                  "output: {plots: false}\n", 0, ""),
    # `evaluation:` not a mapping: AttributeError in the rotate check of a score dataset
    "evaluation-not-a-mapping": (SCORE_DATA + "evaluation: x\n", 2, "evaluation in"),
    "evaluation-a-list": (SCORE_DATA + "evaluation: [rotate]\n", 2, "evaluation in"),
    # a self-containing alias reached json.dumps of the recipe (ValueError: circular reference); deep
    # nesting hit RecursionError; an alias bomb would have been printed in full in the error line
    "recursive-alias": (SCORE_DATA + "output: {dir: &d [*d], plots: false}\n", 2, "`&a [*a]`"),
    "deep-nesting": (SCORE_DATA + "seed: " + "[" * 600 + "]" * 600 + "\n", 2, "nested too deeply"),
    "alias-bomb": (SCORE_DATA + "seed: [&a0 [x, x, x, x, x, x, x, x, x, x]"
                   + "".join(f", &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)) + "]\n",
                   2, "aliases expand to more than"),
    # sizes numpy cannot allocate: ValueError (dimension exceeded) or MemoryError after validation
    "synthetic-patterns-huge": ("data: {plugin: synthetic-patterns, classes: 3, dim: 100000000000}\n", 2, "data in"),
    "synthetic-impostors-huge": ("data: {plugin: synthetic-impostors, classes: 18446744073709551616}\n", 2, "data.classes in"),
    "ncx2-grid-huge-dim": (SCORE_DATA + "estimators: [{plugin: ncx2-grid, dim: [1, 18446744073709551616]}]\n", 2,
                           "estimators[0].dim in"),
    "ncx2-grid-huge-steps": (SCORE_DATA + "estimators: [{plugin: ncx2-grid, sigma: {steps: 18446744073709551616}}]\n",
                             2, "estimators[0] in"),
    "shrinkage-huge-bootstrap": (SCORE_DATA + "estimators: [{plugin: shrinkage, weight: empirical-bayes, "
                                 "bootstrap: 18446744073709551616}]\n", 2, "estimators[0].bootstrap in"),
    # every image failed to resize (OverflowError) and was reported as "unreadable or corrupt"
    "image-sets-huge-resize": ("data: {plugin: image-sets, path: ., resize: [18446744073709551616, 4]}\n"
                               "distance: euclidean\n", 2, "data.resize in"),
    # negative seeds reached numpy.random.default_rng: ValueError
    "recipe-seed": (SCORE_DATA + "seed: -1\n", 2, "seed in"),
    "score-matrix-seed": (SCORE_DATA.replace("path: scores.csv", "path: scores.csv, seed: -3"), 2, "data in"),
    "synthetic-patterns-seed": ("data: {plugin: synthetic-patterns, classes: 3, seed: -1}\ndistance: euclidean\n", 2,
                                "data in"),
    "synthetic-impostors-seed": ("data: {plugin: synthetic-impostors, classes: 3, train: 5, test: 5, seed: -1}\n", 2,
                                 "data in"),
}


@pytest.mark.parametrize("name", sorted(REGRESSIONS))
def test_fuzz_regression(name, tmp_path):
    text, code, where = REGRESSIONS[name]
    (tmp_path / "scores.csv").write_text(SCORES, encoding="utf-8")
    _write(tmp_path, "recipe.yaml", text.encode("utf-8"))
    assert invoke_and_check(tmp_path / "recipe.yaml", tmp_path / "out") == code
    if code == 2:
        result = runner.invoke(app, ["validate", str(tmp_path / "recipe.yaml")])
        assert where in result.stderr, result.stderr


@pytest.mark.parametrize("labels, code", [([b"a", b"a", "日".encode(), "日".encode()], 0),  # UTF-8 bytes: decoded
                                          ([b"a", b"a", b"\xe6", b"\xe6"], 2)])  # not UTF-8: was UnicodeDecodeError
def test_fuzz_regression_npz_bytes_labels(labels, code, tmp_path):
    np.savez(tmp_path / "p.npz", X=np.array([[0.0], [0.1], [1.0], [1.2]]), labels=np.array(labels),
             sets=np.array([b"1", b"2", b"1", b"2"]))
    _write(tmp_path, "recipe.yaml", b"data: {plugin: npz-patterns, path: p.npz}\ndistance: euclidean\n"
                                    b"estimators: [generic-interp]\noutput: {plots: false}\n")
    assert invoke_and_check(tmp_path / "recipe.yaml", tmp_path / "out") == code


def test_fuzz_regression_notes_stay_one_line(tmp_path):
    """Names with a line break (legal in file names and quoted CSV cells) once split a `note:` over two lines."""
    from PIL import Image

    for c in ("a", "b"):
        for s in ("1", "2"):
            (tmp_path / "images" / c / s).mkdir(parents=True)
            for k in range(2):
                arr = np.random.default_rng([k, len(c), int(s)]).integers(0, 256, (4, 4), dtype=np.uint8)
                Image.fromarray(arr).save(tmp_path / "images" / c / s / f"i{k}.png")
    (tmp_path / "images" / "a" / "1" / "bad\nname.png").write_bytes(b"not an image")
    _write(tmp_path, "images.yaml", b"data: {plugin: image-sets, path: images}\ndistance: euclidean\n"
                                    b"estimators: [generic-interp]\noutput: {plots: false}\n")
    assert invoke_and_check(tmp_path / "images.yaml", tmp_path / "out-images") == 0
    # a class folder with a line break, one image per set: mutual-subspace's note lists those sets
    (tmp_path / "images" / "a" / "1" / "bad\nname.png").unlink()
    (tmp_path / "images" / "b").rename(tmp_path / "images" / "b\nx")
    for folder in (tmp_path / "images").glob("*/*"):
        (folder / "i1.png").unlink()
    _write(tmp_path, "subspace.yaml", b"data: {plugin: image-sets, path: images}\n"
                                      b"distance: {plugin: mutual-subspace, components: 2}\n"
                                      b"estimators: [generic-interp]\noutput: {plots: false}\n")
    assert invoke_and_check(tmp_path / "subspace.yaml", tmp_path / "out-subspace") == 0
    (tmp_path / "m.csv").write_text(',a,"b\nx",c\na,0.9,-1,0.2\na,0.8,-1,0.1\nb,0.2,-1,0.3\nc,0.3,-1,0.9\n'
                                    'c,0.2,-1,0.8\nb,0.1,-1,0.3\n', encoding="utf-8")
    _write(tmp_path, "scores.yaml", b"data: {plugin: score-matrix, path: m.csv, missing: -1}\n"
                                    b"estimators: [generic-interp]\noutput: {plots: false}\n")
    assert invoke_and_check(tmp_path / "scores.yaml", tmp_path / "out-scores") == 0


# ---------------------------------------------------------------------------------------------
# hostile output folders and saved calibrations (issue 19): planted journals, tampered manifests,
# special files where outputs go; damaged calibrations given to `threshold` and `accept`

NAMES = st.sampled_from(["../victim.txt", "my-notes.txt", "thresholds.csv", "report.md", "manifest.json",
                         ".journal.json", "/etc/passwd", "sub/x", "", ".", "..", "a\x00b", "x" * 300, 7, None])
RECORDS = st.sampled_from([{}, {"bytes": 1, "sha256": "0" * 64}, {"bytes": -1, "sha256": "x"}, None, [], "x",
                           {"bytes": True, "sha256": "f" * 64},
                           # the true record of the user's my-notes.txt ("mine\n"): a journal stating it still
                           # owns nothing (issue 19 audit, D3)
                           {"bytes": 5, "sha256": "fcbc800db3f1867000b852f1ce0044b8f1584f76ade1ed6e65189824f95c3cda"}])


#: seals a stranger can put in a journal or manifest: none, or anything but one made with the user's key
MACS = st.sampled_from([None, "0" * 64, "f" * 64, 7, ""])


def _with_mac(draw, doc: dict) -> dict:
    mac = draw(MACS) if draw(st.booleans()) else None
    return doc if mac is None else {**doc, "mac": mac}


@st.composite
def journal_json(draw, truth: dict[str, dict]) -> bytes:
    """A planted journal: hostile names and records, or (issue 31, mostly) a well-formed one naming files in the
    folder (``truth``: name -> its true record: the user's files, planted staged files) with their true size and
    SHA-256, as new files of its commit or as files it replaces."""
    if truth and draw(st.integers(0, 3)):
        files = draw(st.lists(st.sampled_from(sorted(truth)), min_size=1, max_size=3, unique=True))
        replaces = {n: truth[n] for n in draw(st.lists(st.sampled_from(sorted(truth)), max_size=2, unique=True))}
        manifest = _with_mac(draw, {"format": "calibrate-output", "version": 2, "files": {n: truth[n] for n in files}})
        return json.dumps(_with_mac(draw, {"files": files, "replaces": replaces, "manifest": manifest})).encode("utf-8")
    files = draw(st.lists(NAMES, max_size=3))
    replaces = (draw(st.lists(NAMES, max_size=3)) if draw(st.booleans())
                else {str(draw(NAMES)): draw(RECORDS) for _ in range(draw(st.integers(0, 2)))})
    manifest = {"format": draw(st.sampled_from(["calibrate-output", "other", None])), "version": 1,
                "files": {str(n): draw(RECORDS) for n in files} if draw(st.booleans()) else draw(st.sampled_from([[], "x"]))}
    doc = draw(st.sampled_from([{"files": files, "replaces": replaces, "manifest": manifest},
                                {"files": files, "manifest": manifest}, [files], "x", None]))
    raw = json.dumps(doc).encode("utf-8")
    return raw if draw(st.integers(0, 9)) else raw[: draw(st.integers(0, len(raw)))]


def _snapshot(root: Path) -> dict[str, tuple]:
    """Every path under ``root`` with its type and (for regular files) content."""
    out = {}
    for p in sorted(root.rglob("*")):
        st_ = p.lstat()
        out[str(p.relative_to(root))] = (stat_kind(st_.st_mode), p.read_bytes() if stat.S_ISREG(st_.st_mode) else None)
    return out


def stat_kind(mode: int) -> str:
    return "link" if stat.S_ISLNK(mode) else "fifo" if stat.S_ISFIFO(mode) else "dir" if stat.S_ISDIR(mode) else "file"


@FUZZ
@given(st.data())
def test_fuzz_hostile_output_folders(data):
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        values, probes, gallery = make_scores_for_fuzz()
        (tmp / "scores.csv").write_text(values)
        recipe = {"version": 1, "data": {"plugin": "score-matrix", "path": "scores.csv"},
                  "transform": {"plugin": "similarity-to-distance", "upper": 1.0},
                  "estimators": [{"plugin": "class-interp"}], "evaluation": {"targets": [0.1]},
                  "output": {"dir": "out", "plots": False}}
        (tmp / "recipe.yaml").write_text(yaml.safe_dump(recipe))
        out = tmp / "out"
        if data.draw(st.booleans()):  # a previous complete run, then its manifest tampered with
            assert runner.invoke(app, ["run", str(tmp / "recipe.yaml"), "-q"]).exit_code == 0
            doc = json.loads((out / "manifest.json").read_text())
            for _ in range(data.draw(st.integers(0, 2))):
                doc["files"][str(data.draw(NAMES))] = data.draw(RECORDS)
            (out / "manifest.json").write_text(json.dumps(doc))
        out.mkdir(exist_ok=True)
        (out / "my-notes.txt").write_text("mine\n")
        if not (out / "thresholds.csv").exists() and data.draw(st.booleans()):
            (out / "thresholds.csv").write_text("my own thresholds\n")  # the user's file of an output name
        (tmp / "victim.txt").write_text("victim\n")
        if data.draw(st.integers(0, 3)):
            staging = out / ".calibrate-staging-planted"
            staging.mkdir()
            planted = data.draw(st.lists(st.sampled_from(["thresholds.csv", "my-notes.txt", "x.csv"]), max_size=2))
            for name in planted:
                (staging / name).write_text("planted\n")
            truth = {name: _true_record((out / name).read_bytes()) for name in ("my-notes.txt", "thresholds.csv")
                     if (out / name).is_file() and not (out / name).is_symlink()}
            truth.update({name: _true_record(b"planted\n") for name in planted if name not in truth})
            (staging / ".journal.json").write_bytes(data.draw(journal_json(truth)))
        special = data.draw(st.sampled_from([None, "fifo", "link-out", "link-victim"]))
        target = out / data.draw(st.sampled_from(["thresholds.csv", "report.md", "other.csv"]))
        if special and not target.exists():
            if special == "fifo":
                os.mkfifo(target)
            else:
                target.symlink_to(tmp / "victim.txt" if special == "link-victim" else "/dev/null")
        outside = {k: v for k, v in _snapshot(tmp).items() if not k.startswith("out")}
        user = {k: v for k, v in _snapshot(out).items()
                if k == "my-notes.txt" or v[0] in ("fifo", "link") or v[1] == b"my own thresholds\n"}
        with _time_limit(HANG_SECONDS):
            result = runner.invoke(app, ["run", str(tmp / "recipe.yaml"), "-q"])
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert result.exit_code in (0, 2), f"exit {result.exit_code}: {result.stderr}\n{result.exception!r}"
        if result.exit_code == 2:
            assert len(lines) == 1 and lines[0].startswith("error: "), lines
        assert {k: v for k, v in _snapshot(tmp).items() if not k.startswith("out")} == outside, "touched outside --out"
        now = _snapshot(out)
        assert all(now.get(k) == v for k, v in user.items()), "a user file or special file was changed"


def _true_record(data: bytes) -> dict:
    return {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def make_scores_for_fuzz() -> tuple[str, list, list]:
    rng = np.random.default_rng(5)
    gallery = [f"g{j}" for j in range(6)]
    probes = [g for g in gallery for _ in range(4)]
    lines = [",".join([""] + gallery)]
    for p in probes:
        lines.append(",".join([p] + [f"{(rng.beta(6, 2) if p == g else rng.beta(2, 5)):.4f}" for g in gallery]))
    return "\n".join(lines) + "\n", probes, gallery


_CALIBRATION: dict = {}


def _valid_calibration() -> dict:
    if not _CALIBRATION:
        import calibrate

        rng = np.random.default_rng(6)
        cal = calibrate.fit({f"c{i}": rng.beta(2, 5, 60) for i in range(5)}, predict=True, replicates=20,
                            targets=(0.1, 0.05), impostors_only=True)
        _CALIBRATION.update(cal.to_dict())
    return copy.deepcopy(_CALIBRATION)


#: values no number in a model's or transform's state may take: each must be refused on load (audit S3)
WRONG_TYPES = ["1", "x", True, None, [1], {}, 10**400, float("nan"), float("inf")]
#: values in range for some fields and absurd for others: they load or are refused, never answer with a warning
OUT_OF_RANGE = [1e30, -1e30, 0, -1, 2, 1e10, 1e-300, 0.5]


def _state_numbers(doc: dict) -> list[tuple]:
    """Paths to every number (not a boolean) in the estimators' and the transform's saved state."""
    roots = [("transform", "state")] + [("estimators", label, "state") for label in doc["estimators"]]
    out = []
    for root in roots:
        node = doc
        for key in root:
            node = node[key]
        stack = [(root, node)]
        while stack:
            path, node = stack.pop()
            items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
            for key, value in items:
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    out.append(path + (key,))
                else:
                    stack.append((path + (key,), value))
    return out


@st.composite
def damaged_state(draw, doc: dict) -> tuple[dict, bool]:
    """(the calibration with one number of a saved state replaced, whether the replacement must be refused)."""
    path = draw(st.sampled_from(_state_numbers(doc)))
    wrong = draw(st.booleans())
    value = draw(st.sampled_from(WRONG_TYPES if wrong else OUT_OF_RANGE))
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = copy.deepcopy(value)
    return doc, wrong


@FUZZ
@given(st.data())
def test_fuzz_damaged_calibrations(data):
    must_refuse = False
    if data.draw(st.booleans()):
        doc, must_refuse = data.draw(damaged_state(_valid_calibration()))
    else:
        doc = data.draw(mutated(_valid_calibration()))
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        path = tmp / "cal.json"
        raw = json.dumps(doc, allow_nan=True).encode("utf-8")
        if data.draw(st.integers(0, 5)) == 0:
            raw = raw[: data.draw(st.integers(0, len(raw)))]
        path.write_bytes(raw)
        (tmp / "scores.txt").write_text("c1 c2 c2/a 0.4\nc1 c1 c1/a 0.9\n")
        for args in (["threshold", str(path), "--class", "c1", "--fpr", "0.05"],
                     ["accept", str(path), str(tmp / "scores.txt"), "--fpr", "0.05", "--out", str(tmp / "d.csv")]):
            with _time_limit(HANG_SECONDS):
                result = runner.invoke(app, args)
            _check(result, args[0], None)
            assert "encountered" not in result.stderr, f"{args[0]}: a numpy warning leaked: {result.stderr}"
            if must_refuse and len(raw) == len(json.dumps(doc, allow_nan=True).encode("utf-8")):
                assert result.exit_code == 2, f"{args[0]}: a wrong-typed number in a saved state was used"


# ---------------------------------------------------------------------------------------------
# hostile groups files (issue 31): given to a recipe (`data: {groups: FILE}`) and to `calibrate evaluate --groups`

GROUP_NAMES = ["F", "M", "", " ", "=cmd|' /C calc'!A0", "+1", "-x", "@sum", "a,b", 'q"t', "日本", "\u0000", "x" * 300,
               "unlabelled", "nan", "1e400"]
GROUP_CLASSES = ["g0", "g1", "g2", "g3", "g4", "g5", "g9", "", "G0", " g1", "g0 "]


@st.composite
def groups_csv(draw) -> bytes:
    header = draw(st.sampled_from(["class,group"] * 6 + ["group,class", "class,group,extra", "klass,group",
                                                        "class;group", "", "\ufeffclass,group", "class,group,class"]))
    plain = st.tuples(st.sampled_from(GROUP_CLASSES[:6]), st.sampled_from(["F", "M"]))
    rows = draw(st.lists(st.one_of(plain, plain, plain, st.tuples(st.sampled_from(GROUP_CLASSES),
                                                                  st.sampled_from(GROUP_NAMES))), max_size=10))
    order = (lambda c, g: f"{g},{c}") if header.startswith("group") else (lambda c, g: f"{c},{g}")
    text = "\n".join([header] + [order(json.dumps(c) if "," in c else c, json.dumps(g) if "," in g or '"' in g else g)
                                 for c, g in rows]) + draw(st.sampled_from(["\n", "", "\n\n", "\r\n"]))
    raw = text.encode("utf-8")
    damage = draw(st.integers(0, 19))
    if damage == 0 and raw:  # a stray byte: not UTF-8, or a NUL
        b = bytearray(raw)
        b[draw(st.integers(0, len(b) - 1))] = draw(st.sampled_from([0x00, 0xff, 0xc3]))
        raw = bytes(b)
    elif damage == 1:
        raw = raw[: draw(st.integers(0, len(raw)))]
    return raw


_GROUP_CALIBRATION: dict = {}


@FUZZ
@given(st.data())
def test_fuzz_hostile_groups_files(data):
    """A groups file is data the user hands over: whatever it holds, a recipe run, `evaluate --groups` and
    `fit --groups` end in exit 0 or one `error:` line, and never touch the file."""
    raw = data.draw(groups_csv())
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        values, probes, gallery = make_scores_for_fuzz()
        (tmp / "scores.csv").write_text(values)
        (tmp / "groups.csv").write_bytes(raw)
        lines = "".join(f"{g} {p} {p}/{k} {0.9 if g == p else 0.2 + 0.01 * ((k + j) % 7):.2f}\n"
                        for k, p in enumerate(probes) for j, g in enumerate(gallery))
        (tmp / "scores.txt").write_text(lines)
        recipe = {"version": 1, "data": {"plugin": "score-matrix", "path": "scores.csv", "groups": "groups.csv"},
                  "transform": {"plugin": "similarity-to-distance", "upper": 1.0},
                  "estimators": [{"plugin": "class-interp"}], "evaluation": {"targets": [0.1]},
                  "output": {"dir": "out", "plots": False}}
        (tmp / "recipe.yaml").write_text(yaml.safe_dump(recipe))
        invoke_and_check(tmp / "recipe.yaml", tmp / "out")
        if not _GROUP_CALIBRATION:
            done = runner.invoke(app, ["fit", str(tmp / "scores.txt"), "--fpr", "0.1", "--no-predict",
                                       "--estimator", "class-interp", "--out", str(tmp / "cal.json")])
            assert done.exit_code == 0, done.stderr
            _GROUP_CALIBRATION["doc"] = (tmp / "cal.json").read_bytes()
        (tmp / "cal.json").write_bytes(_GROUP_CALIBRATION["doc"])
        for args in (["evaluate", str(tmp / "cal.json"), str(tmp / "scores.txt"), "--groups", str(tmp / "groups.csv")],
                     ["fit", str(tmp / "scores.txt"), "--fpr", "0.1", "--no-predict", "--estimator", "class-interp",
                      "--groups", str(tmp / "groups.csv"), "--out", str(tmp / "cal2.json")]):
            with _time_limit(HANG_SECONDS):
                result = runner.invoke(app, args)
            _check(result, args[0], None)
        assert (tmp / "groups.csv").read_bytes() == raw, "the groups file was changed"
