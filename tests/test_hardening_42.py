"""Issue 42's reproductions (hardening, round three), each on a small run of its own: a folder (or FIFO) where
calibrate reads a file, a packed array declaring more values than its state, saved numbers impossible for the
file's own transform and training record, a cohort file whose probe rows name another real class, user text as
HTML in report.md, and ``missing: .nan``."""

from __future__ import annotations

import base64
import json
import os
import signal
import shutil
import tracemalloc
import zlib

import numpy as np
import pytest
from typer.testing import CliRunner

import calibrate
from calibrate.cli.commands import app
from calibrate.contract.packed import ENCODING, packed, unpacked
from calibrate.errors import CalibrationError, DataError
from calibrate.saved.json_format import dumps_artifact

from calibrate_test_helpers import make_scores, score_recipe, write_recipe, write_scores

runner = CliRunner()


def _one_line(result, *words) -> str:
    """The single ``error:`` line of an exit 2 (no traceback), holding every one of ``words``."""
    assert result.exit_code == 2, (result.exit_code, result.stderr, result.exception)
    (line,) = [l for l in result.stderr.splitlines() if l.strip()]
    assert line.startswith("error: ") and all(w in line for w in words), line
    return line


@pytest.fixture(scope="module")
def plain_run(tmp_path_factory):
    """A finished run (generic-interp, class-interp, auto) over a small score matrix: (folder, recipe, its output)."""
    folder = tmp_path_factory.mktemp("plain")
    csv = write_scores(folder / "s.csv", *make_scores(n_classes=8, probes_per_class=6))
    recipe = write_recipe(folder / "r.yaml", score_recipe(
        csv, folder / "out", estimators=({"plugin": "generic-interp"}, {"plugin": "class-interp"}, {"plugin": "auto"}),
        targets=(0.05, 0.02)) | {"output": {"dir": str(folder / "out"), "plots": False}})
    result = runner.invoke(app, ["run", str(recipe), "-q"])
    assert result.exit_code == 0, result.stderr
    return folder, recipe, folder / "out"


def _attempts(folder) -> str:
    path = folder / "attempts.txt"
    path.write_text("id01 id02 p1 0.4\nid01 id01 p2 0.9\n")
    return str(path)


# ---- 1. a folder (or FIFO) where a file is read: one line naming it --------------------------------------------

@pytest.mark.parametrize("what", ["manifest", "journal"])
@pytest.mark.parametrize("kind", ["folder", "fifo"])
def test_a_folder_or_fifo_where_the_output_folder_has_a_file_is_one_line(tmp_path, plain_run, what, kind):
    folder, recipe, out = plain_run
    target = tmp_path / "out"
    shutil.copytree(out, target)
    place = target / "manifest.json" if what == "manifest" else target / ".calibrate-staging-x" / ".journal.json"
    if what == "manifest":
        place.unlink()
    place.parent.mkdir(exist_ok=True)
    os.mkdir(place) if kind == "folder" else os.mkfifo(place)
    signal.alarm(60)  # a regression that blocks on the FIFO fails instead of hanging
    try:
        result = runner.invoke(app, ["run", str(recipe), "--out", str(target), "-q"])
    finally:
        signal.alarm(0)
    _one_line(result, str(place), "a folder" if kind == "folder" else "a FIFO")
    assert place.exists() and (target / "thresholds.csv").read_bytes() == (out / "thresholds.csv").read_bytes()


@pytest.mark.parametrize("role", ["recipe", "groups", "scores", "calibration", "attempts"])
def test_a_folder_given_as_any_input_file_is_one_line_naming_it(tmp_path, plain_run, role):
    folder, recipe, out = plain_run
    bad = tmp_path / "a-folder"
    bad.mkdir()
    doc = json.loads(json.dumps(__import__("yaml").safe_load(recipe.read_text())))
    doc["output"]["dir"] = str(tmp_path / "o")
    if role == "groups":
        doc["data"]["groups"] = str(bad)
    elif role == "scores":
        doc["data"]["path"] = str(bad)
    mine = write_recipe(tmp_path / "r.yaml", doc)
    command = {"recipe": ["validate", str(bad)], "groups": ["validate", str(mine)], "scores": ["validate", str(mine)],
               "calibration": ["threshold", str(bad / "calibration.json"), "--class", "id01", "--fpr", "0.05"],
               "cohort": ["accept", str(out), _attempts(tmp_path), "--fpr", "0.05", "--estimator", "auto",
                          "--cohort", str(bad), "--out", str(tmp_path / "d.csv")],
               "attempts": ["accept", str(out), str(bad), "--fpr", "0.05", "--estimator", "auto",
                            "--out", str(tmp_path / "d.csv")]}[role]
    if role == "calibration":
        (bad / "calibration.json").mkdir()
    _one_line(runner.invoke(app, command), "holds no calibration.json" if role == "calibration" else "a folder")


# ---- 2. a packed array is bounded by its state before it is inflated ---------------------------------------------

def _deflated_zeros(count: int) -> str:
    """Packed data of ``count`` zero bytes (every difference 0 bytes long), as a deflate bomb holds them."""
    z = zlib.compressobj(6)
    block = bytes(1 << 22)
    parts = [z.compress(block[:min(1 << 22, count - k)]) for k in range(0, count, 1 << 22)] + [z.flush()]
    return base64.b64encode(b"".join(parts)).decode("ascii")


def test_a_packed_array_declaring_more_values_than_its_state_is_refused_before_inflating(tmp_path, plain_run):
    """Issue 42's bomb, smaller: generic-interp's pooled sample declares 10**8 values (deflated zeros, digest
    recomputed) where the state's n_pooled says a few hundred: refused naming the field, nothing inflated."""
    _, _, out = plain_run
    doc = json.loads((out / "calibration.json").read_text())
    state = doc["estimators"]["generic-interp"]["state"]
    state["pooled"] = {"encoding": ENCODING, "count": 10**8, "data": _deflated_zeros(10**8)}
    path = tmp_path / "bomb.json"
    path.write_text(dumps_artifact(doc))
    tracemalloc.start()
    try:
        with pytest.raises(CalibrationError, match=rf"state\.n_pooled is {state['n_pooled']}: must be at least the "
                                                   r"100,000,000 pooled values"):
            calibrate.load(path, "generic-interp")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 32 << 20  # the file's text and its JSON: far from the 800 MB the count declares


def test_a_packed_count_that_lies_is_found_with_a_few_mb_inflated():
    """A count within the state's size whose data inflates to far more: inflation stops at what the count allows."""
    value = {"encoding": ENCODING, "count": 5000, "data": _deflated_zeros(10**8)}
    tracemalloc.start()
    try:
        with pytest.raises(DataError, match="state.pooled data does not hold the 5000 values its count declares"):
            unpacked(value, "state.pooled", at_most=5000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20
    with pytest.raises(DataError, match="declares 5,000 values, but the state says it holds at most 4,999"):
        unpacked(value, "state.pooled", at_most=4999)


def test_packed_arrays_unpack_exactly_across_chunks():
    """Streaming in chunks gives every float back bit for bit (the running sum carried from chunk to chunk)."""
    rng = np.random.default_rng(42)
    for values in (np.sort(rng.gamma(2.0, 1.0, (1 << 20) + 17)), rng.normal(size=2 * (1 << 20) + 3),
                   np.round(np.sort(rng.random(1 << 20)), 4)):
        assert unpacked(packed(values), "x").tobytes() == values.tobytes()


# ---- 3. saved numbers are checked against the file's own transform and training record ---------------------------

def _edited(out, tmp_path, label: str, edit) -> str:
    """The run's calibration with estimator ``label``'s state edited by ``edit`` and its digest recomputed."""
    doc = json.loads((out / "calibration.json").read_text())
    edit(doc["estimators"][label]["state"])
    path = tmp_path / "edited.json"
    path.write_text(dumps_artifact(doc))
    return str(path)


def _values(state, key):
    value = state[key]
    return unpacked(value, key) if isinstance(value, dict) else np.asarray(value, dtype=np.float64)


@pytest.mark.parametrize("label, key, edit, named", [
    ("generic-interp", "pooled", lambda v: 100.0 + (v - v.min()) * 0.38 / np.ptp(v), r"state\.pooled\[0\] is 100\.0: outside"),
    ("generic-interp", "pooled", lambda v: np.full_like(v, 1e308), r"state\.pooled\[0\] is 1e\+308: outside"),
    ("class-interp", "values", lambda v: v + 100.0, r"state\.values\[0\] is 100\.\d+: outside"),
])
def test_saved_distances_beyond_the_files_own_training_range_are_refused_naming_the_field(
        tmp_path, plain_run, label, key, edit, named):
    """Issue 42, 3: distances of 100 (or 1e308) where the file's transform and training scores allow at most 1 made
    `accept` admit every impostor, exit 0."""
    _, _, out = plain_run

    def change(state):
        state[key] = packed(edit(_values(state, key))) if isinstance(state[key], dict) else \
            edit(_values(state, key)).tolist()

    path = _edited(out, tmp_path, label, change)
    with pytest.raises(CalibrationError, match=named):
        calibrate.load(path, label)
    _one_line(runner.invoke(app, ["accept", path, _attempts(tmp_path), "--fpr", "0.05", "--estimator", label,
                                  "--out", str(tmp_path / "d.csv")]), f"state.{key}[0]")
    assert not (tmp_path / "d.csv").exists()


def test_a_scale_of_1e308_is_refused_naming_the_field(tmp_path, plain_run):
    """Issue 42, 3: auto's (or anchored's) scale of 1e308 set that class's threshold to distance 0."""
    _, _, out = plain_run
    path = _edited(out, tmp_path, "auto", lambda s: s["scale"].__setitem__(0, 1e308))
    with pytest.raises(CalibrationError, match=r"state\.scale\[0\] is 1e\+308"):
        calibrate.load(path, "auto")


def test_auto_bulk_scales_and_locations_are_held_to_the_working_range():
    """Without an anchor (auto-bulk, znorm): a location outside the working-scale training range, or a scale wider
    than it, is refused when the loader knows the range; the same state loads outside a loader (no range)."""
    from calibrate.contract.statecheck import training_distances
    from calibrate_builtins.estimators.znorm import ZnormModel

    rng = np.random.default_rng(5)
    d = {f"c{i}": np.sort(rng.gamma(4.0, 0.1, 50)) + 0.05 for i in range(4)}
    y = {c: np.log(v + 0.01) for c, v in d.items()}
    state = {"classes": list(d), "loc": [float(np.median(v)) for v in y.values()],
             "scale": [float(np.std(v)) for v in y.values()], "n": [50] * 4, "family": "lognormal", "offset": 0.01,
             "pooled_shape": False, "predictive": False, "sorted_z": None, "tail": None, "min_tail_count": 10.0}
    span = (min(v.min() for v in d.values()), max(v.max() for v in d.values()))
    with training_distances(span):
        ZnormModel.from_state(state)  # as fitted: loads
        for key, value, named in (("loc", 40.0, r"state\.loc\[1\] is 40\.0: outside"),
                                  ("scale", 1e300, r"state\.scale\[1\] is 1e\+300: wider than")):
            bad = json.loads(json.dumps(state))
            bad[key][1] = value
            with pytest.raises(DataError, match=named):
                ZnormModel.from_state(bad)
    bad = json.loads(json.dumps(state))
    bad["scale"][1] = 1e300
    ZnormModel.from_state(bad)  # no range known: only the types and signs are checked


def test_an_enrolled_class_beyond_the_training_scores_still_loads(tmp_path, plain_run):
    """Enrolling widens the saved training span, so the class's distances stay within what the file says."""
    _, _, out = plain_run
    cal = calibrate.load(out / "calibration.json", "class-interp")
    low = cal.training_scores[0]
    cal.enroll("newcomer", np.linspace(low - 0.3, low + 0.2, 40))
    cal.save(tmp_path / "enrolled.json")
    again = calibrate.load(tmp_path / "enrolled.json")
    assert again.threshold("newcomer", 0.05) == pytest.approx(cal.threshold("newcomer", 0.05), rel=1e-12)


# ---- 4. a cohort file whose probe rows name another real class --------------------------------------------------

def test_a_cohort_row_naming_another_real_class_is_noted_naming_the_probe(tmp_path):
    from cohort_lists import lists_recipe, write_lists

    folder = write_lists(tmp_path / "lists")
    recipe = lists_recipe(folder, "snorm")
    doc = __import__("yaml").safe_load(recipe.read_text())
    doc["output"] = {"dir": str(tmp_path / "out"), "plots": False}
    write_recipe(recipe, doc)
    assert runner.invoke(app, ["run", str(recipe), "-q"]).exit_code == 0
    rows = [line.split() for line in (folder / "cohort-tnorm").read_text().splitlines()]
    victim = next(r[2] for r in rows if r[2].startswith("c03/eval"))
    (tmp_path / "bad-tnorm").write_text("".join(" ".join([m, "c07" if p == victim else real, p, s]) + "\n"
                                                for m, real, p, s in rows))
    result = runner.invoke(app, ["accept", str(tmp_path / "out"), str(folder / "scores-eval"), "--fpr", "0.05",
                                 "--cohort", str(tmp_path / "bad-tnorm"), "--out", str(tmp_path / "d.csv")])
    assert result.exit_code == 0
    assert any(line.startswith("note: ") and repr(victim) in line and "'c07' there but 'c03'" in line
               for line in result.stderr.splitlines()), result.stderr


# ---- 5. users' text in report.md renders as text, never as HTML --------------------------------------------------

def _html_tokens(text: str) -> list:
    markdown_it = pytest.importorskip("markdown_it")
    found, todo = [], list(markdown_it.MarkdownIt("commonmark").enable("table").parse(text))
    while todo:
        token = todo.pop()
        todo += token.children or []
        if token.type in ("html_inline", "html_block") or (token.type == "link_open" and token.markup == "autolink"):
            found.append(token.content)
    return found


def test_group_names_in_report_md_render_as_text(tmp_path, plain_run):
    """Issue 42, 5: a group named ``<img src=x onerror=alert(1)>`` went into report.md verbatim (only | escaped)."""
    folder, recipe, _ = plain_run
    names = ["<img src=x onerror=alert(1)>", "a|b", "<!-- x", "[x](javascript:alert(1))"]
    (tmp_path / "groups.csv").write_text("class,group\n" + "".join(f"id{c:02d},{names[c % 4]}\n" for c in range(8)))
    doc = __import__("yaml").safe_load(recipe.read_text())
    doc["data"]["groups"] = str(tmp_path / "groups.csv")
    doc["output"]["dir"] = str(tmp_path / "out")
    result = runner.invoke(app, ["run", str(write_recipe(tmp_path / "r.yaml", doc)), "-q"])
    assert result.exit_code == 0, result.stderr
    text = (tmp_path / "out" / "report.md").read_text()
    assert _html_tokens(text) == [] and "<img" not in text
    assert "&lt;img src=x onerror=alert(1)>" in text and "a\\|b" in text


def test_markdown_safe_leaves_calibrates_own_text_as_written():
    from calibrate.formatting import markdown_safe

    own = "| 8.4% | score >= 0.5377 | p < 0.05 | FPR <1% | score <= t |"
    assert markdown_safe(own) == own
    assert _html_tokens(markdown_safe("<b>x</b> &lt;i&gt; <http://x.y> </p> <?php <!DOCTYPE")) == []


# ---- 6. missing: a finite number or nothing ----------------------------------------------------------------------

@pytest.mark.parametrize("marker", [".nan", ".inf", "-.inf"])
def test_a_missing_marker_that_no_score_can_equal_is_refused(tmp_path, plain_run, marker):
    folder, recipe, _ = plain_run
    text = recipe.read_text().replace("kind: similarity", f"kind: similarity\n  missing: {marker}", 1)
    assert f"missing: {marker}" in text
    path = tmp_path / "r.yaml"
    path.write_text(text)
    _one_line(runner.invoke(app, ["validate", str(path)]), "missing:", "not a finite number")
