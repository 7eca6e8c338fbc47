"""Every field of a saved calibration, mutated (issue 31, item 4): the mutations are generated from real saved
documents (auto, class-interp and a confidence-bound generic-interp, each with its predicted interval, and an
S-norm run's normaliser), walking every entry and trying null, a wrong type, NaN, a negative and a huge number, an
empty list, a ragged list and the entry removed. ``calibrate.load`` and ``calibrate threshold``, ``accept`` and
``evaluate`` either answer exactly as before (exit 0, the same output) or refuse with exit 2 and exactly one
``error:`` line naming the file; never a traceback.

* As calibrate wrote it (with its digest), any change that alters the document is refused by ``calibrate.load``
  (the commands on every tenth: the same code path, and each costs a few milliseconds); the digest removed, the
  same content answers the same, with a note.
* Without a digest (an older file, or one edited by hand), every field is still checked whole: what loads answers
  with finite thresholds and predicted rates in [0, 1] with low <= high (asked through the API for every mutation,
  through the commands where an answer changed and on every tenth), and says that it could not be checked (a
  note), so no changed decision is silent."""

from __future__ import annotations

import copy
import json
import math
import warnings
from pathlib import Path

import numpy as np
import pytest
import typer
from click.testing import CliRunner

import calibrate
from calibrate.saved.json_format import DIGEST
from calibrate.cli.commands import app
from calibrate.errors import CalibrateError, CalibrationError

runner = CliRunner()
COMMAND = typer.main.get_command(app)  # built once: typer's runner builds it at every call (10 ms)

ESTIMATORS = {"auto": {}, "class-interp": {}, "generic-interp": {"confidence": 0.9}}
TARGETS = (0.05, 0.02)


def _attempts(rng, n_classes: int, impostors: int, genuine: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(scores, claimed, real) of similarity comparisons: impostors beta(2, 5), genuine beta(6, 2)."""
    claimed, real, scores = [], [], []
    for i in range(n_classes):
        claimed += [f"c{i}"] * (impostors + genuine)
        real += [f"p{i}"] * impostors + [f"c{i}"] * genuine
        scores += list(rng.beta(2, 5, impostors)) + list(rng.beta(6, 2, genuine))
    return np.array(scores), np.array(claimed), np.array(real)


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> tuple[Path, dict[str, dict]]:
    """(folder, estimator -> the saved document as calibrate wrote it, also in the folder as ESTIMATOR.json);
    the folder's ``eval`` is a score list to decide."""
    tmp = tmp_path_factory.mktemp("mutations")
    rng = np.random.default_rng(31)
    scores, claimed, real = _attempts(rng, 6, 80, 8)
    docs = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, extra in ESTIMATORS.items():
            cal = calibrate.fit(scores, claimed, real=real, kind="similarity", estimator=name, predict=True,
                                targets=TARGETS, replicates=20, **extra)
            docs[name] = json.loads(Path(cal.save(tmp / f"{name}.json")).read_text())
    ev_scores, ev_claimed, ev_real = _attempts(np.random.default_rng(32), 6, 40, 4)
    (tmp / "eval").write_text("".join(f"{c} {r} {r}/{k} {float(s)!r}\n" for k, (c, r, s) in
                                      enumerate(zip(ev_claimed, ev_real, ev_scores))), encoding="ascii")
    return tmp, docs


def _mutations(doc: dict, top: bool = True) -> list[tuple[str, tuple, str, object]]:
    """(JSON path, keys to the entry, operation, value) for every entry of ``doc`` (``top``: the document-wide
    entries too, else the estimators' only), by the entry's type: numbers null, a string, NaN, negative, huge, a
    list; strings null, a number, empty, another, a list; booleans null, a string, negated; lists null, a string,
    empty, ragged (the last removed), nested, and their first and last elements likewise; mappings null, a string,
    a list, and each entry likewise and removed."""
    out: list[tuple[str, tuple, str, object]] = []

    def walk(value, keys: tuple, where: str) -> None:
        if isinstance(value, bool):
            tries = [None, "true", not value]
        elif isinstance(value, int | float):
            tries = [None, "1", math.nan, -abs(value) - 1.0, 1e308, []]
        elif isinstance(value, str):
            tries = [None, 7, "", value + "x", []]
        elif value is None:
            tries = [0.5, "x", -1]
        else:
            tries = [None, "x", [] if isinstance(value, dict) else {}]
        out.extend((f"{where} = {json.dumps(t)}", keys, "set", t) for t in tries)
        if isinstance(value, dict):
            for k, v in value.items():
                out.append((f"{where}.{k} removed", (*keys, k), "remove", None))
                walk(v, (*keys, k), f"{where}.{k}")
        elif isinstance(value, list) and value:
            out.extend([(f"{where} = []", keys, "set", []), (f"{where} ragged", keys, "ragged", None),
                        (f"{where} nested", keys, "set", [value])])
            for i in sorted({0, len(value) - 1}):
                walk(value[i], (*keys, i), f"{where}[{i}]")

    for k, v in doc.items():
        if k == "estimators":
            for label, entry in v.items():
                walk(entry, ("estimators", label), f"estimators[{label}]")
        elif top:
            out.append((f"{k} removed", (k,), "remove", None))
            walk(v, (k,), k)
    return out


def _mutated(text: str, keys: tuple, op: str, value) -> dict:
    """The document ``text`` (JSON) with the mutation applied."""
    doc = json.loads(text)
    parent = doc
    for k in keys[:-1]:
        parent = parent[k]
    if op == "set":
        parent[keys[-1]] = copy.deepcopy(value)
    elif op == "remove":
        parent.pop(keys[-1])
    else:
        parent[keys[-1]].pop()
    return doc


@pytest.fixture(autouse=True)
def _one_registry(monkeypatch):
    """The plugin registry built once, not at every load (about 25 ms each; what it holds is the same): the
    thousands of loads below then take seconds."""
    from calibrate import api

    registry = api.build_registry()
    monkeypatch.setattr(api, "build_registry", lambda extra_plugins=(): registry)


def _all_mutations(docs: dict, seal: bool = True) -> list[tuple[str, str, str]]:
    """(estimator, JSON path, mutated document as JSON): the document-wide entries once (on auto's), each
    estimator's own; only mutations that change the document (``seal`` False: on the document without its
    digest, the digest's own entry left out)."""
    out = []
    for k, (name, original) in enumerate(docs.items()):
        if not seal:
            original = {key: value for key, value in original.items() if key != DIGEST}
        text = json.dumps(original)
        for where, keys, op, value in _mutations(original, top=k == 0):
            changed = json.dumps(_mutated(text, keys, op, value))
            if changed != text:
                out.append((name, where, changed))
    return out


def _cli(path: Path, folder: Path) -> list[tuple[int, str, str]]:
    """(exit code, stdout, stderr) of threshold, accept and evaluate on the calibration at ``path``; never a
    traceback."""
    out = []
    for args in (["threshold", str(path), "--class", "c1", "--fpr", "0.05", "--json"],
                 ["accept", str(path), str(folder / "eval"), "--fpr", "0.05", "--out", "-"],
                 ["evaluate", str(path), str(folder / "eval"), "--json"]):
        result = runner.invoke(COMMAND, args)
        assert result.exception is None or isinstance(result.exception, SystemExit), (args[0], result.exc_info)
        assert "Traceback" not in result.output
        out.append((result.exit_code, result.stdout, result.stderr))
    return out


def _refused_once(result, path: Path | None) -> None:
    """Exit 2 with one line on stderr, an ``error:`` naming ``path`` (when given)."""
    code, _, stderr = result
    lines = stderr.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), result
    assert path is None or str(path) in lines[0], result


def _answers(cal, folder: Path) -> tuple:
    """What the commands print, asked of a loaded calibration: the threshold of c1, the predicted intervals (the
    gallery's, c1's, on the evaluation's attempts) and every decision on the evaluation file (None where it
    refuses, as the commands do, with a CalibrateError)."""
    def asked(question):
        try:
            return question()
        except CalibrateError:
            return None

    rows = [line.split() for line in (folder / "eval").read_text().splitlines()]
    claimed, scores = [r[0] for r in rows], [float(r[3]) for r in rows]
    return (asked(lambda: cal.threshold("c1", 0.05)), asked(lambda: cal.predicted_fpr(0.05)),
            asked(lambda: cal.predicted_fpr(0.05, cls="c1")), asked(lambda: cal.predicted_fpr(0.05, attempts=240)),
            asked(lambda: tuple(cal.accept(claimed, scores, 0.05).tolist())))


def _sound(answers: tuple) -> None:
    """Finite thresholds, predicted rates in [0, 1] with low <= high."""
    threshold, *intervals, _ = answers
    assert threshold is None or math.isfinite(threshold), answers
    for interval in intervals:
        assert interval is None or 0 <= interval[0] <= interval[1] <= 1, answers


def _check_cli(results, path: Path) -> None:
    """What the commands print from a calibration without a digest: exit 0 with the note that it could not be
    checked, finite thresholds and sound intervals, or exit 2 with one line."""
    threshold, _, evaluated = results
    for result in results:
        if result[0] == 2:  # the file, or a question it cannot answer (a class it no longer holds)
            _refused_once(result, None)
            continue
        assert result[0] == 0 and "holds no content digest" in result[2], result
    if threshold[0] == 0:
        doc = json.loads(threshold[1])
        assert math.isfinite(doc["score_threshold"])
        for side in ("gallery", "class"):
            low, high = doc.get(f"{side}_long_run_fpr_low"), doc.get(f"{side}_long_run_fpr_high")
            assert (low is None) == (high is None) and (low is None or 0 <= low <= high <= 1), doc
    if evaluated[0] == 0:
        for row in json.loads(evaluated[1])["targets"]:
            low, high = row.get("predicted_fpr_low"), row.get("predicted_fpr_high")
            assert low is None or 0 <= low <= high <= 1, row


def _write(folder: Path, name: str, text: str) -> Path:
    """``text`` as the file ``name`` in ``folder``, written over what it held and cut to its length: a file
    truncated to nothing and rewritten costs a flush on ext4 (milliseconds each), and thousands of new files cost
    as much to clean up."""
    path = folder / name
    with open(path, "r+b" if path.exists() else "wb") as fh:
        fh.write(text.encode("utf-8"))
        fh.truncate()
    return path


def _load(path: Path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return calibrate.load(path)


def test_every_mutation_of_a_saved_calibration_is_refused_or_changes_nothing(saved):
    folder, docs = saved
    bases = {name: _cli(folder / f"{name}.json", folder) for name in docs}
    assert all(code == 0 for base in bases.values() for code, _, _ in base), bases
    mutations = _all_mutations(docs)
    for k, (name, where, text) in enumerate(mutations):
        path = _write(folder, "sealed.json", text)  # as calibrate wrote it, digest included, then changed
        if where == f"{DIGEST} removed":  # the content as written, without its seal: the same answers, and a note
            for was, now in zip(bases[name], _cli(path, folder), strict=True):
                assert now[:2] == was[:2] and "holds no content digest" in now[2]
            continue
        with pytest.raises(CalibrationError, match=path.name) as err:
            _load(path)
        assert "\n" not in str(err.value), where
        if k % 10 == 0:  # the command line says the same, in one line (a sample: the same code path)
            for result in _cli(path, folder):
                _refused_once(result, path)
    assert len(mutations) > 400


def test_without_a_digest_every_field_is_still_checked_whole(saved):
    folder, docs = saved
    bases = {}
    for name, original in docs.items():
        path = folder / f"unsealed-{name}.json"
        path.write_text(json.dumps({k: v for k, v in original.items() if k != DIGEST}))
        bases[name] = _answers(_load(path), folder)
    loaded = refused = 0
    for k, (name, where, text) in enumerate(_all_mutations(docs, seal=False)):
        path = _write(folder, "unsealed.json", text)
        try:
            cal = _load(path)
        except CalibrationError as exc:
            assert path.name in str(exc) and "\n" not in str(exc), (where, exc)
            refused += 1
            continue
        loaded += 1
        answers = _answers(cal, folder)
        _sound(answers)
        if answers != bases[name] or k % 10 == 0:  # what changed, and a sample, through the command line
            _check_cli(_cli(path, folder), path)
    assert refused > 200 and loaded > 20, (refused, loaded)


@pytest.fixture(scope="module")
def normalised(tmp_path_factory) -> tuple[Path, dict]:
    """(folder, an S-norm run's calibration.json): bob score lists with cohort files in the folder."""
    from test_calibration_schema import snorm_run

    tmp = snorm_run(tmp_path_factory.mktemp("normalised"))
    return tmp, json.loads((tmp / "out" / "calibration.json").read_text())


def test_every_mutation_of_a_saved_normaliser_is_refused_or_checked(normalised):
    """The normaliser's entry (plugin, sides, cohort, classes, statistics) mutated as above: with the digest every
    change is refused; without it the loaded ones decide (`accept --cohort`) with exit 0 and a note, or refuse in
    one line."""
    folder, original = normalised
    text = json.dumps(original)
    args = [str(folder / "scores-eval"), "--missing", "-1", "--cohort", str(folder / "cohort-tnorm"), "--fpr", "0.05",
            "--out", "-"]
    tried = loaded = 0
    for k, (where, keys, op, value) in enumerate(m for m in _mutations(original) if m[1][0] == "normalizer"):
        changed = _mutated(text, keys, op, value)
        if json.dumps(changed) == text:
            continue
        tried += 1
        path = _write(folder, "sealed.json", json.dumps(changed))
        with pytest.raises(CalibrationError, match="sealed.json"):
            _load(path)
        del changed[DIGEST]
        path = _write(folder, "unsealed.json", json.dumps(changed))
        try:
            _load(path)
        except CalibrationError as exc:
            assert "unsealed.json" in str(exc) and "\n" not in str(exc), (where, exc)
            continue
        loaded += 1
        with warnings.catch_warnings():  # numpy's overflow warnings as a user meets them (notes), not as errors
            warnings.simplefilter("default", RuntimeWarning)
            result = runner.invoke(COMMAND, ["accept", str(path), *args])
        assert result.exception is None or isinstance(result.exception, SystemExit), (where, result.exc_info)
        if result.exit_code == 2:
            _refused_once((result.exit_code, result.stdout, result.stderr), None)
        else:
            assert result.exit_code == 0 and "holds no content digest" in result.stderr, (where, result.output)
    assert tried > 50 and loaded > 5, (tried, loaded)
