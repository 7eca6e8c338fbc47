"""An audit of the command line under hostile input (issue 19's audit, rerunnable with fresh seeds).

    .venv/bin/python benchmarks/audit.py [--seed 0] [--cases 20] [--timeout 60] [--only FAMILY ...] [--json PATH]

Every case runs the installed ``calibrate`` in a subprocess, in a fresh sandbox folder holding the
output folder (with a user file inside), a victim file, a symbolic link and a FIFO beside it. Families:

* ``recipes``: a small valid recipe with values, keys and names mutated (junk types, ``/`` and ``..``
  in names, huge integers, YAML tags, aliases);
* ``data``: score lists and score matrices with mutated bytes and cells (``0_5``, non-ASCII digits,
  huge labels, NaN), an ``.npz`` whose header claims more than the file holds, FIFOs as data files;
* ``calibrations``: a valid saved calibration and a sharded run's folder with fields mutated (deep
  nesting, wrong types, unknown families, duplicate or NUL labels, ``pooled.file`` outside the folder
  or a FIFO, ``parts: "many"``), given to ``threshold`` and ``accept``;
* ``journals``: planted staging journals and tampered manifests, then ``calibrate run --out``; since
  issue 31 also journals and hand-written manifests stating the true size and SHA-256 of the user's
  files (notes.txt, a thresholds.csv of theirs), with or without a stranger's seal;
* ``outputs``: ``accept --out`` at a FIFO without reader, ``/dev/null``, a link, a folder, ``-``;
* ``kills``: runs killed with SIGKILL at random moments, and pairs of concurrent runs into one folder;
* issue 31's: ``ownership`` (planted journals, manifests and set-aside manifests stating the *true* size and
  SHA-256 of the user's files in --out), ``inputs`` (``accept --out``, ``fit --out``, ``evaluate --det`` naming
  one of the command's inputs, a run folder's or a sharded run's files among them, by path, ``./``, a link or
  a hard link: must be refused), ``cohorts`` (an S-norm calibration given a cohort with a constant probe line,
  a rounding residue of one, scores near 1e300, NaN, 2 members, one member short, negated, x100: refused;
  the true cohort: decided), ``tampered`` (a run folder whose calibration.json was edited after the run,
  manifest untouched: refused) and ``mistakes`` (a newcomer's: claimed and real ids spelled apart, scores x100,
  repeated lines, another gallery's calibration, a target of 1e-9, ``evaluation: 0`` and the like, a decimal
  comma, a gzip file: an error, or a note naming the mistake).
* issue 42's, within the families above: ``journals`` with manifest.json or a staging journal replaced by a folder;
  ``calibrations`` whose states are impossible for their own file (digest recomputed: a packed array declaring 10**9
  values, the bomb, which must be refused within 5 s and 600 MB; pooled distances of 100 or 1e308, class-interp
  values of 100, auto's scale of 1e308: refused); ``cohorts`` whose T-norm rows name another real class for one
  probe (a note naming it); ``mistakes`` with ``missing: .nan`` (refused) and group names that are HTML (report.md
  must hold no raw HTML).

Per case: exit code, traceback (exit 1 or "Traceback" on stderr), hang (no exit within the timeout),
clean refusal (exit 2 with exactly one ``error:`` line), damage (a file outside the output folder
changed, the user file inside it changed or lost, a special file replaced), silence (exit 0 where a
refusal, or a note naming the mistake, was due), and for ``kills`` a folder left with a manifest whose files
do not match it. The audit keeps its own owner key (``CALIBRATE_STATE_DIR`` in its temporary folder). Prints counts per family and every failing case
(command and first stderr line); ``--json`` writes them. Exit status 1 when any case failed.
"""

from __future__ import annotations

import argparse
import base64
import copy
import hashlib
import io
import json
import os
import random
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import zipfile
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

CALIBRATE = str(Path(sys.executable).with_name("calibrate"))
FAMILIES = ("recipes", "data", "calibrations", "journals", "outputs", "kills",
            "ownership", "inputs", "cohorts", "tampered", "mistakes")
BOB = Path(__file__).resolve().parents[1] / "examples" / "bob-scores"
JUNK = [None, "", "x", "日本語", -1, 0, 1, 2 ** 64, 10 ** 400, 0.5, -0.5, 1e-300, float("inf"), float("nan"), True,
        [], {}, [1, 2], {"plugin": "nope"}, "../../etc/passwd", "a/b", "..", "os.system", "x" * 5000, "\x00"]
YAML_SPLICES = ["!!python/object/apply:os.system ['echo pwned']", "!!python/name:os.system", "&a [*a, *a]",
                "!!binary aGVsbG8=", "0_5", "1_000", "[unclosed", "\t0.1", ".nan"]


@dataclass
class Case:
    family: str
    what: str
    command: list[str]
    exit: int | None = None
    seconds: float = 0.0
    stderr: str = ""
    problems: list[str] = field(default_factory=list)
    #: files of the sandbox (relative) that must end unchanged although they lie inside out/
    keep: list[str] = field(default_factory=list)
    #: files outside out/ the command is asked to write (left out of the "outside changed" check)
    writes: list[str] = field(default_factory=list)
    #: "refuse": only a one-line exit 2 passes; "warn": exit 2, or exit 0 with a note or warning on stderr
    #: that matches ``said`` (a regular expression naming the mistake);
    #: "ok": exit 0 (a valid control case); "": any clean outcome
    expect: str = ""
    said: str = "warning"
    #: the user's files in --out besides notes.txt (name -> content) that must survive the case
    user_files: dict[str, str] = field(default_factory=dict)
    #: issue 42's bomb: the most seconds and MB (maximum resident set) the command may take
    limits: tuple[float, float] | None = None
    #: a report.md (relative) that must hold no raw HTML after the case
    report: str = ""


# ---- the sandbox -------------------------------------------------------------------------------

def _snapshot(root: Path, skip: Path | None = None) -> dict[str, tuple]:
    out = {}
    for p in sorted(root.rglob("*")):
        if skip is not None and (p == skip or skip in p.parents):
            continue
        mode = p.lstat().st_mode
        kind = "link" if stat.S_ISLNK(mode) else "fifo" if stat.S_ISFIFO(mode) else "dir" if stat.S_ISDIR(mode) else "file"
        digest = hashlib.sha256(p.read_bytes()).hexdigest() if kind == "file" else (os.readlink(p) if kind == "link" else "")
        out[str(p.relative_to(root))] = (kind, digest)
    return out


def sandbox(tmp: Path) -> Path:
    """A case's folder: out/ with the user's notes.txt, and beside it victim.txt, a link and a FIFO."""
    box = Path(tempfile.mkdtemp(dir=tmp))
    (box / "out").mkdir()
    (box / "out" / "notes.txt").write_text("the user's\n")
    (box / "victim.txt").write_text("victim\n")
    (box / "link-to-victim").symlink_to(box / "victim.txt")
    os.mkfifo(box / "pipe")
    return box


def score_matrix_text(rng: random.Random, n: int = 6, probes: int = 4) -> str:
    gallery = [f"g{j}" for j in range(n)]
    lines = [",".join([""] + gallery)]
    for g in gallery:
        for _ in range(probes):
            lines.append(",".join([g] + [f"{(rng.betavariate(6, 2) if h == g else rng.betavariate(2, 5)):.4f}"
                                         for h in gallery]))
    return "\n".join(lines) + "\n"


def score_list_text(rng: random.Random, n: int = 6, probes: int = 4) -> str:
    names = [f"s{j}" for j in range(n)]
    return "".join(f"{c} {r} {r}/{k} {(rng.betavariate(6, 2) if c == r else rng.betavariate(2, 5)):.4f}\n"
                   for r in names for k in range(probes) for c in names)


def base_recipe() -> dict:
    return {"version": 1, "data": {"plugin": "score-matrix", "path": "scores.csv", "kind": "similarity"},
            "transform": {"plugin": "similarity-to-distance", "upper": 1.0},
            "estimators": [{"plugin": "auto"}, {"plugin": "class-interp", "name": "ci"}],
            "evaluation": {"targets": [0.05, 0.01], "prediction": {"replicates": 20}},
            "output": {"dir": "out", "plots": False}}


def _paths(node, prefix=()):
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


def mutate(doc, rng: random.Random, times: int = 2):
    doc = copy.deepcopy(doc)
    for _ in range(times):
        paths = _paths(doc)
        if not paths:
            break
        path, _ = rng.choice(paths)
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        op = rng.choice(["junk", "junk", "delete", "rename"])
        if op == "delete":
            del parent[path[-1]]
        elif op == "junk" or not isinstance(parent, dict):
            parent[path[-1]] = copy.deepcopy(rng.choice(JUNK))
        else:
            parent[rng.choice(["x" * 300, "../k", str(path[-1]).upper()])] = parent.pop(path[-1])
    return doc


def _yaml(doc: dict, rng: random.Random) -> str:
    import yaml

    text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
    if rng.random() < 0.3:
        lines = text.splitlines()
        i = rng.randrange(len(lines))
        if ":" in lines[i]:
            lines[i] = lines[i].split(":")[0] + ": " + rng.choice(YAML_SPLICES)
        text = "\n".join(lines) + "\n"
    return text


# ---- the families ------------------------------------------------------------------------------

def recipes(tmp: Path, rng: random.Random, n: int):
    for k in range(n):
        box = sandbox(tmp)
        (box / "scores.csv").write_text(score_matrix_text(rng))
        doc = mutate(base_recipe(), rng, rng.choice([1, 2, 3]))
        if rng.random() < 0.3 and isinstance(doc.get("estimators"), list) and doc["estimators"] \
                and isinstance(doc["estimators"][0], dict):
            doc["estimators"][0]["name"] = rng.choice(["../evil", "a/b", "..", "x" * 100, "ok-name"])
        (box / "recipe.yaml").write_text(_yaml(doc, rng))
        yield box, Case("recipes", f"mutated recipe {k}", [CALIBRATE, "run", "recipe.yaml", "--out", "out", "-q"])


def data(tmp: Path, rng: random.Random, n: int):
    for k in range(n):
        box = sandbox(tmp)
        kind = rng.choice(["matrix", "list", "npz", "fifo"])
        recipe = base_recipe()
        if kind == "matrix":
            text = score_matrix_text(rng)
        elif kind == "list":
            text = score_list_text(rng)
            recipe["data"] = {"plugin": "score-list", "path": "scores.csv", "kind": "similarity"}
        if kind in ("matrix", "list"):
            lines = text.splitlines()
            for _ in range(rng.choice([1, 2, 3])):
                i = rng.randrange(len(lines))
                cells = lines[i].replace(" ", ",").split(",")
                j = rng.randrange(len(cells))
                cells[j] = rng.choice(["0_5", "\u0665", "nan", "-inf", "", "x" * rng.choice([2000, 100_000, 2_000_000]),
                                       "1e-300", "-1", "1e400", "\x00", "0x1p3"])
                lines[i] = ("," if kind == "matrix" else " ").join(cells)
            raw = ("\n".join(lines) + "\n").encode("utf-8")
            if rng.random() < 0.2:
                b = bytearray(raw)
                b[rng.randrange(len(b))] = rng.randrange(256)
                raw = bytes(b)
            (box / "scores.csv").write_bytes(raw)
        elif kind == "npz":
            header = io.BytesIO()
            shape = rng.choice([(400_000_000, 8), (10 ** 12,), (3, 2)])
            np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False, "shape": shape})
            labels = io.BytesIO()
            np.save(labels, np.array(["a", "b", "c"]))
            with zipfile.ZipFile(box / "p.npz", "w") as z:
                z.writestr("X.npy", header.getvalue() + b"\0" * 64)
                z.writestr("labels.npy", labels.getvalue())
                z.writestr("sets.npy", labels.getvalue())
            recipe["data"] = {"plugin": "npz-patterns", "path": "p.npz"}
            recipe.pop("transform")
        else:
            os.mkfifo(box / "scores.csv")
        (box / "recipe.yaml").write_text(_yaml(recipe, random.Random(0)))
        yield box, Case("data", f"{kind} file {k}", [CALIBRATE, "run", "recipe.yaml", "--out", "out", "-q"])


def _valid_run(tmp: Path, sharded: bool) -> Path:
    """A finished run's output folder (plain or sharded), made once and copied into each case."""
    cache = tmp / ("sharded-run" if sharded else "plain-run")
    if cache.exists():
        return cache
    work = Path(tempfile.mkdtemp(dir=tmp))
    rng = random.Random(1)
    recipe = base_recipe()
    if sharded:
        (work / "shards").mkdir()
        for s in range(2):
            names = [f"c{s}_{j}" for j in range(4)]
            lines = "".join(f"{c} r{s}_{q} p{s}_{q} {rng.uniform(0.1, 2.0):.4f}\n" for c in names for q in range(30))
            (work / "shards" / f"shard{s}.txt").write_text(lines)
        recipe["data"] = {"plugin": "score-shards", "path": "shards", "kind": "distance"}
        recipe["transform"] = {"plugin": "identity"}
        recipe["evaluation"] = {"targets": [0.05, 0.01], "prediction": False}
    else:
        (work / "scores.csv").write_text(score_matrix_text(rng))
    recipe["output"] = {"dir": str(cache), "plots": False}
    return _run_once(work, recipe, cache, "valid")


def _run_once(work: Path, recipe: dict, cache: Path, what: str) -> Path:
    """Run ``recipe`` from ``work`` into ``cache`` (the audit stops when it fails); ``cache``."""
    (work / "recipe.yaml").write_text(json.dumps(recipe))
    done = subprocess.run([CALIBRATE, "run", str(work / "recipe.yaml"), "-q"], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"the audit's {what} run failed: {done.stderr}")
    return cache


def _bob_run(tmp: Path) -> Path:
    """A run on the bob example's lists with generic-interp, class-interp and auto (made once): its folder."""
    cache = tmp / "bob-run"
    if cache.exists():
        return cache
    work = Path(tempfile.mkdtemp(dir=tmp))
    _bob_files(work)
    recipe = {"version": 1, "data": {"plugin": "score-list", "train": "scores-dev", "test": "scores-eval",
                                     "kind": "similarity", "missing": -1},
              "estimators": [{"plugin": "generic-interp"}, {"plugin": "class-interp"}, {"plugin": "auto"}],
              "evaluation": {"targets": [0.05, 0.02], "prediction": False}, "output": {"dir": str(cache), "plots": False}}
    return _run_once(work, recipe, cache, "bob")


#: issue 42's states, impossible for their own file: (estimator, what is done to its state)
IMPOSSIBLE = ("bomb", "bomb with consistent counts", "pooled 100", "pooled 1e308", "values 100", "scale 1e308")
_BOMB: list[str] = []


def _bomb_data() -> str:
    """Packed data of 10**9 zero bytes (every difference 0 bytes long): 1.3 MB of base64, made once."""
    if not _BOMB:
        z, block = zlib.compressobj(6), bytes(1 << 24)
        parts = [z.compress(block[:min(1 << 24, 10**9 - at)]) for at in range(0, 10**9, 1 << 24)] + [z.flush()]
        _BOMB.append(base64.b64encode(b"".join(parts)).decode("ascii"))
    return _BOMB[0]


def impossible_state(tmp: Path, box: Path, what: str) -> tuple[str, str]:
    """(estimator, the saved calibration cal.json in ``box``): the bob run's with ``what`` (:data:`IMPOSSIBLE`) done to
    its state and the digest recomputed, as a user's editor could."""
    from calibrate.contract.packed import ENCODING, packed, unpacked
    from calibrate.saved.json_format import dumps_artifact

    doc = json.loads((_bob_run(tmp) / "calibration.json").read_text())
    label = {"values 100": "class-interp", "scale 1e308": "auto"}.get(what, "generic-interp")
    state = doc["estimators"][label]["state"]
    key = "values" if label == "class-interp" else "pooled"
    if what.startswith("bomb"):
        state["pooled"] = {"encoding": ENCODING, "count": 10**9, "data": _bomb_data()}
        if what == "bomb with consistent counts":
            state["n_pooled"] = doc["training"]["impostors"] = 10**9
    elif what == "scale 1e308":
        state["scale"][0] = 1e308
    else:
        v = unpacked(state[key], key) if isinstance(state[key], dict) else np.asarray(state[key], dtype=np.float64)
        v = np.full_like(v, 1e308) if what.endswith("1e308") else 100.0 + (v - v.min()) * 0.38 / max(np.ptp(v), 1e-12)
        state[key] = packed(v)
    (box / "cal.json").write_text(dumps_artifact(doc))
    return label, "cal.json"


def calibrations(tmp: Path, rng: random.Random, n: int):
    plain, sharded = _valid_run(tmp, False), _valid_run(tmp, True)
    for k in range(n):
        box = sandbox(tmp)
        (box / "attempts.txt").write_text("g1 g2 g2/a 0.4\ng1 g1 g1/a 0.9\nc0_1 r p 0.5\n")
        if rng.random() < 0.3:  # issue 42: a state its own file makes impossible (digest recomputed)
            _bob_files(box)
            what = rng.choice(IMPOSSIBLE)
            label, target = impossible_state(tmp, box, what)
            command = rng.choice([
                [CALIBRATE, "threshold", target, "--class", "subj01", "--fpr", "0.05", "--estimator", label],
                [CALIBRATE, "accept", target, "scores-eval", "--fpr", "0.05", "--estimator", label, "--missing", "-1",
                 "--out", "out/decisions.csv"],
                [CALIBRATE, "evaluate", target, "scores-eval", "--estimator", label, "--missing", "-1"]])
            yield box, Case("calibrations", f"{what} {k}", command, expect="refuse",
                            limits=(5.0, 600.0) if what.startswith("bomb") else None)
            continue
        if rng.random() < 0.5:
            doc = json.loads((plain / "calibration.json").read_text())
            what = rng.choice(["mutate", "mutate", "nest", "family", "scale", "dup", "nul", "cut"])
            entry = doc["estimators"]["auto"]
            if what == "mutate":
                doc = mutate(doc, rng, rng.choice([1, 2, 3]))
            elif what == "family":
                entry["state"]["family"] = "os.system"
            elif what == "scale":
                entry["state"]["scale"][0] = 0
            elif what == "dup":
                entry["state"]["classes"][1] = entry["state"]["classes"][0]
            elif what == "nul":
                entry["state"]["classes"][0] = "g\x000"
            if isinstance(doc, dict) and rng.random() < 0.5:  # an old file without a digest: the fields alone guard it
                doc.pop("digest", None)
            text = ("[" * 100_000 + "]" * 100_000) if what == "nest" else json.dumps(doc)
            if what == "cut":
                text = text[: rng.randrange(len(text))]
            (box / "cal.json").write_text(text)
            target = "cal.json"
        else:
            shutil.copytree(sharded, box / "run")
            head = json.loads((box / "run" / "calibration.json").read_text())
            what = rng.choice(["parts", "classes", "pooled-outside", "pooled-fifo", "class-list", "mutate"])
            if what == "parts":
                head["parts"] = rng.choice(["many", 10 ** 9, -1, 1.5])
            elif what == "classes":
                (box / "run" / "classes-part00000.json").write_text(json.dumps(rng.choice([[1, 2], "x", [None]])))
            elif what.startswith("pooled"):
                part = json.loads((box / "run" / "calibration-part00000.json").read_text())
                if what == "pooled-fifo":
                    (box / "run" / "pooled-auto.npy").unlink()
                    os.mkfifo(box / "run" / "pooled-auto.npy")
                else:
                    np.save(box / "secret.npy", np.arange(5.0))
                    part["estimators"]["auto"]["state"]["pooled"] = {"file": "../secret.npy"}
                (box / "run" / "calibration-part00000.json").write_text(json.dumps(part))
            elif what == "mutate":
                head = mutate(head, rng)
            (box / "run" / "calibration.json").write_text(json.dumps(head))
            target = "run"
        if rng.random() < 0.5:
            command = [CALIBRATE, "threshold", target, "--class", rng.choice(["g1", "c0_1"]), "--fpr", "0.05",
                       "--estimator", "auto"]
        else:
            command = [CALIBRATE, "accept", target, "attempts.txt", "--fpr", "0.05", "--estimator", "auto",
                       "--out", "out/decisions.csv"]
        yield box, Case("calibrations", f"{what} {k}", command)


def _record(data: bytes) -> dict:
    return {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def journals(tmp: Path, rng: random.Random, n: int):
    names = ["../victim.txt", "notes.txt", "thresholds.csv", "/etc/passwd", "..", "manifest.json", "../link-to-victim"]
    for k in range(n):
        box = sandbox(tmp)
        (box / "scores.csv").write_text(score_matrix_text(rng))
        (box / "recipe.yaml").write_text(json.dumps(base_recipe()))
        what = rng.choice(["tampered manifest", "planted journal", "true-hash journal", "true-hash manifest",
                           "folder manifest", "folder journal"])
        user: dict[str, str] = {}
        if what.startswith("folder"):  # issue 42: a folder where calibrate reads a file of its own
            subprocess.run([CALIBRATE, "run", "recipe.yaml", "--out", "out", "-q"], cwd=box, capture_output=True)
            if what == "folder manifest":
                (box / "out" / "manifest.json").unlink()
                (box / "out" / "manifest.json").mkdir()
            else:
                (box / "out" / ".calibrate-staging-x" / ".journal.json").mkdir(parents=True)
            yield box, Case("journals", f"{what} {k}", [CALIBRATE, "run", "recipe.yaml", "--out", "out", "-q"],
                            expect="refuse")
            continue
        if what == "tampered manifest":  # a previous run of this user's into this very folder, its manifest edited
            subprocess.run([CALIBRATE, "run", "recipe.yaml", "--out", "out", "-q"], cwd=box, capture_output=True)
            doc = json.loads((box / "out" / "manifest.json").read_text())
            doc["files"][rng.choice(names)] = rng.choice([{"bytes": rng.choice([1, 11]), "sha256": rng.choice(["x", "0" * 64])},
                                                          _record((box / "out" / "notes.txt").read_bytes())])
            (box / "out" / "manifest.json").write_text(json.dumps(doc))
        elif what == "planted journal":
            staging = box / "out" / ".calibrate-staging-evil"
            staging.mkdir()
            files = rng.sample(names, rng.randint(0, 2))
            replaces = rng.sample(names, rng.randint(1, 3))
            doc = {"files": files, "replaces": replaces if rng.random() < 0.5 else
                   {r: {"bytes": 7, "sha256": "0" * 64} for r in replaces},
                   "manifest": {"format": "calibrate-output", "version": 1,
                                "files": {f: {"bytes": 1, "sha256": "0" * 64} for f in files}}}
            (staging / ".journal.json").write_text(json.dumps(doc))
        else:  # issue 31: records with the true size and SHA-256 of the user's files own nothing either
            if rng.random() < 0.5:
                user["thresholds.csv"] = "the user's thresholds\n"
                (box / "out" / "thresholds.csv").write_text(user["thresholds.csv"])
            truth = {p.name: _record(p.read_bytes()) for p in (box / "out").iterdir()}
            listed = rng.sample(sorted(truth), rng.randint(1, len(truth)))
            manifest = {"format": "calibrate-output", "version": rng.choice([1, 2]),
                        "files": {name: truth[name] for name in listed}}
            if rng.random() < 0.5:
                manifest["mac"] = rng.choice(["0" * 64, hashlib.sha256(b"a stranger's key").hexdigest()])
            if what == "true-hash manifest":
                (box / "out" / "manifest.json").write_text(json.dumps(manifest))
            else:
                staging = box / "out" / ".calibrate-staging-evil"
                staging.mkdir()
                replaces = {name: truth[name] for name in rng.sample(sorted(truth), rng.randint(0, len(truth)))}
                doc = {"files": listed, "replaces": replaces, "manifest": manifest}
                if rng.random() < 0.5:
                    doc["mac"] = "0" * 64
                (staging / ".journal.json").write_text(json.dumps(doc))
        yield box, Case("journals", f"{what} {k}", [CALIBRATE, "run", "recipe.yaml", "--out", "out", "-q"],
                        user_files=user)


def outputs(tmp: Path, rng: random.Random, n: int):
    plain = _valid_run(tmp, False)
    for k in range(n):
        box = sandbox(tmp)
        (box / "attempts.txt").write_text("g1 g2 g2/a 0.4\ng1 g1 g1/a 0.9\n")
        target = rng.choice(["pipe", "/dev/null", "link-to-victim", "out", "-", "/dev/full"])
        if target == "/dev/full" and not os.path.exists("/dev/full"):
            target = "/dev/null"
        yield box, Case("outputs", f"accept --out {target} {k}",
                        [CALIBRATE, "accept", str(plain / "calibration.json"), "attempts.txt", "--fpr", "0.05",
                         "--estimator", "auto", "--out", target])


# ---- issue 31's families ------------------------------------------------------------------------

def ownership(tmp: Path, rng: random.Random, n: int):
    """Planted journals and manifests that state the *true* size and SHA-256 of the user's files."""
    for k in range(n):
        box = sandbox(tmp)
        (box / "scores.csv").write_text(score_matrix_text(rng))
        (box / "recipe.yaml").write_text(json.dumps(base_recipe()))
        user = rng.choice(["notes.txt", "thresholds.csv", "report.md", "det.csv"])
        if user != "notes.txt":
            (box / "out" / user).write_text("the user's own\n")
        victims = ["notes.txt"] + ([user] if user != "notes.txt" else [])
        records = {v: _record((box / "out" / v).read_bytes()) for v in victims}
        manifest = {"format": "calibrate-output", "version": 1, "files": dict(records)}
        what = rng.choice(["journal files", "journal replaces", "manifest", "journal and manifest", "previous"])
        if what.startswith("journal"):
            staging = box / "out" / f".calibrate-staging-{rng.choice(['x', 'evil', '0'])}"
            staging.mkdir()
            files = victims if what != "journal replaces" else []
            replaces = dict(records) if what != "journal files" else {}
            (staging / ".journal.json").write_text(json.dumps({"files": files, "replaces": replaces,
                                                                "manifest": manifest}))
        if what in ("manifest", "journal and manifest"):
            (box / "out" / "manifest.json").write_text(json.dumps(manifest))
        if what == "previous":
            (box / "out" / ".calibrate-previous-manifest.json").write_text(json.dumps(manifest))
        yield box, Case("ownership", f"{what} claiming {user} {k}",
                        [CALIBRATE, "run", "recipe.yaml", "--out", "out", "-q"],
                        keep=[f"out/{v}" for v in victims])


def _bob_files(box: Path) -> None:
    for name in ("scores-dev", "scores-eval", "cohort-znorm", "cohort-tnorm"):
        shutil.copy(BOB / name, box / name)


def _normalised_run(tmp: Path) -> Path:
    """An S-norm run on the bob example's lists (made once): its folder."""
    cache = tmp / "snorm-run"
    if cache.exists():
        return cache
    work = Path(tempfile.mkdtemp(dir=tmp))
    _bob_files(work)
    recipe = {"version": 1, "data": {"plugin": "score-list", "train": "scores-dev", "test": "scores-eval",
                                     "kind": "similarity", "missing": -1, "cohort_enrolled": "cohort-znorm",
                                     "cohort_probes": "cohort-tnorm"},
              "normalizer": {"plugin": "snorm"}, "estimators": [{"plugin": "class-interp"}, {"plugin": "auto"}],
              "evaluation": {"targets": [0.05, 0.02], "prediction": False},
              "output": {"dir": str(cache), "plots": False}}
    return _run_once(work, recipe, cache, "normalised")


def inputs(tmp: Path, rng: random.Random, n: int):
    """Commands whose output names one of their own inputs: by path, through a link, or a hard link."""
    sharded, normed = _valid_run(tmp, True), _normalised_run(tmp)
    for k in range(n):
        box = sandbox(tmp)
        _bob_files(box)
        shutil.copytree(normed, box / "run")
        shutil.copytree(sharded, box / "parts")
        (box / "groups.csv").write_text("class,group\n" + "".join(f"subj{j:02d},{'ab'[j % 2]}\n" for j in range(30)))
        command, target = rng.choice([
            (["accept", "run", "scores-eval", "--fpr", "0.05", "--estimator", "auto", "--cohort", "cohort-tnorm"],
             rng.choice(["cohort-tnorm", "run/calibration.json", "run/manifest.json", "scores-eval"])),
            (["accept", "parts", "attempts.txt", "--fpr", "0.05", "--estimator", "auto"],
             rng.choice(["parts/calibration.json", "parts/calibration-part00000.json", "parts/classes-part00000.json",
                         "attempts.txt"])),
            (["fit", "scores-dev", "--fpr", "0.05", "--no-predict", "--groups", "groups.csv"],
             rng.choice(["scores-dev", "groups.csv"])),
            (["evaluate", "run", "scores-eval", "--cohort", "cohort-tnorm", "--groups", "groups.csv", "--det"],
             rng.choice(["cohort-tnorm", "groups.csv", "scores-eval", "run/calibration.json"])),
        ])
        (box / "attempts.txt").write_text("c0_1 r0_1 p0_1 0.5\nc1_2 r p 0.9\n")
        how = rng.choice(["path", "symlink", "hardlink", "dotted"])
        shown = target
        if how == "symlink":
            shown = "alias-link"
            (box / shown).symlink_to(box / target)
        elif how == "hardlink":
            shown = "alias-hard"
            os.link(box / target, box / shown)
        elif how == "dotted":
            shown = "./" + target.replace("/", "/./")
        flag = "--det" if command[-1] == "--det" else "--out"
        command = command[:-1] if command[-1] == "--det" else command
        yield box, Case("inputs", f"{command[0]} {flag} {target} by {how} {k}",
                        [CALIBRATE, *command, flag, shown], expect="refuse")


def _cohort_lines(path: Path) -> list[list[str]]:
    return [line.split() for line in path.read_text().splitlines() if line.strip()]


def cohorts(tmp: Path, rng: random.Random, n: int):
    """A normalised calibration given a cohort that is not the one it was fitted with, or has no spread."""
    normed = _normalised_run(tmp)
    for k in range(n):
        box = sandbox(tmp)
        _bob_files(box)
        rows = _cohort_lines(box / "cohort-tnorm")
        what = rng.choice(["valid", "constant probe", "all constant", "residue", "1e300", "nan", "two members",
                           "negated", "x100", "one member short", "real id changed"])
        probes = sorted({r[2] for r in rows if "/eval_" in r[2]})  # the probes the commands below decide
        members = sorted({r[0] for r in rows})
        if what == "real id changed":  # issue 42: every row of one probe names another real class
            victim = rng.choice(probes)
            other = rng.choice(sorted({r[1] for r in rows} - {r[1] for r in rows if r[2] == victim}))
            rows = [[r[0], other, *r[2:]] if r[2] == victim else r for r in rows]
        elif what == "constant probe":
            victim = rng.choice(probes)
            rows = [r[:3] + ["0.3000"] if r[2] == victim else r for r in rows]
        elif what == "all constant":
            rows = [r[:3] + ["0.3000"] for r in rows]
        elif what == "residue":
            victim = rng.choice(probes)
            rows = [r[:3] + [repr(0.3 + (1e-17 * (i % 2)))] if r[2] == victim else r for i, r in enumerate(rows)]
        elif what == "1e300":
            rows = [r[:3] + [repr(float(r[3]) * 1e300)] for r in rows]
        elif what == "nan":
            i = rng.randrange(len(rows))
            rows[i] = rows[i][:3] + ["nan"]
        elif what == "two members":
            rows = [r for r in rows if r[0] in members[:2]]
        elif what == "one member short":
            rows = [r for r in rows if r[0] != members[-1]]
        elif what == "negated":
            rows = [r[:3] + [repr(-float(r[3]))] for r in rows]
        elif what == "x100":
            rows = [r[:3] + [repr(float(r[3]) * 100)] for r in rows]
        (box / "cohort-tnorm").write_text("".join(" ".join(r) + "\n" for r in rows))
        shutil.copytree(normed, box / "run")
        if rng.random() < 0.5:
            command = [CALIBRATE, "accept", "run", "scores-eval", "--fpr", "0.05", "--estimator", "auto",
                       "--cohort", "cohort-tnorm", "--missing", "-1", "--out", "decisions.csv"]
        else:
            command = [CALIBRATE, "evaluate", "run", "scores-eval", "--cohort", "cohort-tnorm", "--estimator", "auto",
                       "--missing", "-1"]
        yield box, Case("cohorts", f"{what} {k}", command, writes=["decisions.csv"], said="real class",
                        expect={"valid": "ok", "real id changed": "warn"}.get(what, "refuse"))


def tampered(tmp: Path, rng: random.Random, n: int):
    """A run folder whose calibration.json was edited after the run (the manifest left as it was)."""
    plain, normed = _valid_run(tmp, False), _normalised_run(tmp)
    for k in range(n):
        box = sandbox(tmp)
        _bob_files(box)
        source = rng.choice([plain, normed])
        shutil.copytree(source, box / "run")
        doc = json.loads((box / "run" / "calibration.json").read_text())
        choices = ["kind", "drop a class", "threshold", "targets", "whitespace"]
        if "normalizer" in doc:
            choices += ["normalizer removed", "std tiny", "std huge", "std negative"]
        what = rng.choice(choices)
        entry = doc["estimators"]["auto"]
        if what == "kind":
            doc["kind"] = "distance" if doc.get("kind") == "similarity" else "similarity"
        elif what == "normalizer removed":
            doc.pop("normalizer")
        elif what.startswith("std"):
            stats = doc["normalizer"]
            text = json.dumps(stats)
            value = {"std tiny": 1e-300, "std huge": 1e308, "std negative": -1.0}[what]
            stats_text = text.replace('"std": [', f'"std": [{value!r}, ', 1)
            if stats_text == text:
                what = "kind"
                doc["kind"] = "distance" if doc.get("kind") == "similarity" else "similarity"
            else:
                loaded = json.loads(stats_text)
                doc["normalizer"] = loaded
                # keep the list's length: drop the value the inserted one displaced
                def trim(node):
                    if isinstance(node, dict):
                        for key, val in node.items():
                            if key == "std" and isinstance(val, list) and len(val) > 1:
                                del val[1]
                            else:
                                trim(val)
                trim(doc["normalizer"])
        elif what == "drop a class":
            state = entry["state"]
            for key in ("classes",):
                if isinstance(state.get(key), list) and len(state[key]) > 1:
                    state[key] = state[key][:-1]
        elif what == "threshold":
            doc["targets"] = doc.get("targets", [])
            entry["state"] = mutate(entry["state"], rng, 1)
        elif what == "targets":
            doc["targets"] = [0.5]
        text = json.dumps(doc, indent=None if what != "whitespace" else 3)
        (box / "run" / "calibration.json").write_text(text)
        attempts = "scores-eval" if source == normed else "attempts.txt"
        (box / "attempts.txt").write_text("g1 g2 g2/a 0.4\ng1 g1 g1/a 0.9\n")
        extra = ["--cohort", "cohort-tnorm"] if source == normed else []
        command = rng.choice([
            [CALIBRATE, "accept", "run", attempts, "--fpr", "0.05", "--estimator", "auto", *extra,
             "--out", "decisions.csv"],
            [CALIBRATE, "evaluate", "run", attempts, "--estimator", "auto", *extra],
            [CALIBRATE, "threshold", "run", "--class", "g1" if source == plain else "subj01", "--fpr", "0.05",
             "--estimator", "auto"],
        ])
        yield box, Case("tampered", f"{what} ({'normalised' if source == normed else 'plain'}) {k}", command,
                        expect="refuse", writes=["decisions.csv"])


def mistakes(tmp: Path, rng: random.Random, n: int):
    """What a newcomer gets wrong: each must give a warning with the fix, or an error."""
    kinds = ["ids renamed", "x100", "duplicated lines", "another gallery", "fpr 1e-9 fit", "fpr 1e-9 accept",
             "evaluation junk", "decimal comma", "gzip", "missing nan", "html groups"]
    for k in range(n):
        box = sandbox(tmp)
        _bob_files(box)
        what = kinds[k % len(kinds)] if k < len(kinds) else rng.choice(kinds)
        dev = (box / "scores-dev").read_text().splitlines()
        fit = [CALIBRATE, "fit", "scores-dev", "--fpr", "0.05", "--no-predict", "--missing", "-1", "--out", "cal.json"]
        if what in ("missing nan", "html groups"):  # issue 42: a recipe's missing: .nan; group names that are HTML
            import yaml
            recipe = {"version": 1, "data": {"plugin": "score-list", "train": "scores-dev", "test": "scores-eval",
                                             "kind": "similarity", "missing": -1},
                      "evaluation": {"targets": [0.05], "prediction": False}, "output": {"dir": "out", "plots": False}}
            if what == "html groups":
                names = ["<img src=x onerror=alert(1)>", "<script>alert(1)</script>", "a|b</td>", "<!--", "&lt;b&gt;"]
                (box / "groups.csv").write_text("class,group\n" + "".join(
                    f"subj{j:02d},{rng.choice(names)}\n" for j in range(30)))
                recipe["data"]["groups"] = "groups.csv"
            text = yaml.safe_dump(recipe)
            (box / "recipe.yaml").write_text(text.replace("missing: -1", "missing: .nan") if what == "missing nan" else text)
            yield box, Case("mistakes", f"{what} {k}", [CALIBRATE, "run", "recipe.yaml", "-q"],
                            expect="refuse" if what == "missing nan" else "", report="out/report.md")
            continue
        if what not in ("ids renamed", "duplicated lines", "fpr 1e-9 fit", "evaluation junk", "decimal comma", "gzip"):
            done = subprocess.run(fit, cwd=box, capture_output=True, text=True)
            if done.returncode != 0:
                raise SystemExit(f"the audit's valid fit failed: {done.stderr}")
        if what == "ids renamed":
            lines = [" ".join([c, "cfp" + r.removeprefix("subj"), t, s]) for c, r, t, s in (l.split() for l in dev)]
            (box / "scores-dev").write_text("\n".join(lines) + "\n")
            command = fit
        elif what == "x100":
            rows = [l.split() for l in (box / "scores-eval").read_text().splitlines()]
            (box / "scaled").write_text("".join(f"{c} {r} {t} {float(s) * 100 if s != '-1' else -1}\n"
                                                for c, r, t, s in rows))
            command = [CALIBRATE, "accept", "cal.json", "scaled", "--fpr", "0.05", "--missing", "-1",
                       "--out", "decisions.csv"]
        elif what == "duplicated lines":
            (box / "scores-dev").write_text("\n".join(dev + dev[: rng.randint(1, 50)]) + "\n")
            command = fit
        elif what == "another gallery":
            (box / "other").write_text("".join(f"x{j} x{j % 3} x{j % 3}/p 0.{j + 1}\n" for j in range(9)))
            command = [CALIBRATE, "evaluate", "cal.json", "other"]
        elif what == "fpr 1e-9 fit":
            command = [CALIBRATE, "fit", "scores-dev", "--fpr", "1e-9", "--no-predict", "--missing", "-1",
                       "--out", "cal.json"]
        elif what == "fpr 1e-9 accept":
            command = [CALIBRATE, "accept", "cal.json", "scores-eval", "--fpr", "1e-9", "--missing", "-1",
                       "--out", "decisions.csv"]
        elif what == "evaluation junk":
            recipe = {"version": 1, "data": {"plugin": "score-list", "train": "scores-dev", "test": "scores-eval",
                                             "kind": "similarity", "missing": -1},
                      "evaluation": rng.choice([-0.0, "", 0, False, []]), "output": {"dir": "out", "plots": False}}
            import yaml
            (box / "recipe.yaml").write_text(yaml.safe_dump(recipe))
            command = [CALIBRATE, "run", "recipe.yaml", "-q"]
        elif what == "decimal comma":
            (box / "scores-dev").write_text("\n".join(l.replace(".", ",") for l in dev) + "\n")
            command = fit
        else:
            import gzip
            (box / "scores-dev.gz").write_bytes(gzip.compress((box / "scores-dev").read_bytes()))
            command = [CALIBRATE, "fit", "scores-dev.gz", "--fpr", "0.05", "--no-predict", "--missing", "-1",
                       "--out", "cal.json"]
            what = "gzip (read or refused)"
        said = {"ids renamed": "genuine|coincide|never", "x100": "range|scale", "duplicated lines": "repeat|duplicate",
                "another gallery": "does not hold|no attempt", "fpr 1e-9 fit": "extrapolat|1/N",
                "fpr 1e-9 accept": "extrapolat|1/N", "evaluation junk": "evaluation",
                "decimal comma": "decimal comma"}.get(what, ".")
        yield box, Case("mistakes", f"{what} {k}", command, expect="" if what.startswith("gzip") else "warn",
                        writes=["cal.json", "decisions.csv"], said=said)


def _check_folder(out: Path) -> str | None:
    """None when ``out`` holds no manifest, or one whose files all match it."""
    manifest = out / "manifest.json"
    if not manifest.exists():
        return None
    try:
        doc = json.loads(manifest.read_text())
        for name, entry in doc["files"].items():
            data = (out / name).read_bytes()
            if len(data) != entry["bytes"] or hashlib.sha256(data).hexdigest() != entry["sha256"]:
                return f"manifest.json lists {name} but the file does not match it"
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"manifest.json cannot be checked ({exc})"
    return None


def kills(tmp: Path, rng: random.Random, n: int, timeout: float) -> list[Case]:
    """Runs killed at random moments, and concurrent pairs, into one folder with a previous result."""
    cases = []
    for k in range(n):
        box = sandbox(tmp)
        (box / "scores.csv").write_text(score_matrix_text(rng, n=12, probes=6))
        (box / "recipe.yaml").write_text(json.dumps(base_recipe()))
        subprocess.run([CALIBRATE, "run", "recipe.yaml", "--out", "out", "-q"], cwd=box, capture_output=True)
        before = _snapshot(box, skip=box / "out")
        pair = k % 3 == 2
        command = [CALIBRATE, "run", "recipe.yaml", "--out", "out", "-q"]
        case = Case("kills", f"{'concurrent pair' if pair else 'SIGKILL'} {k}", command)
        started = time.perf_counter()
        procs = [subprocess.Popen(command, cwd=box, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                 for _ in range(2 if pair else 1)]
        if not pair:
            time.sleep(rng.uniform(0.2, 3.0))
            procs[0].send_signal(signal.SIGKILL)
        for p in procs:
            try:
                p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                case.problems.append("hang")
        case.seconds = time.perf_counter() - started
        case.exit = procs[0].returncode
        if pair and any(p.returncode != 0 for p in procs):
            case.problems.append(f"a concurrent run failed: {procs[0].stderr.read().decode()[:200]}")
        # the next run finishes or clears what the killed one left, then the folder must be whole
        after = subprocess.run(command, cwd=box, capture_output=True, text=True, timeout=timeout)
        if after.returncode != 0:
            case.problems.append(f"the run after failed: {after.stderr.strip()[:200]}")
        bad = _check_folder(box / "out")
        if bad:
            case.problems.append(bad)
        if _snapshot(box, skip=box / "out") != before:
            case.problems.append("a file outside --out changed")
        if (box / "out" / "notes.txt").read_text() != "the user's\n":
            case.problems.append("the user's file changed")
        cases.append(case)
    return cases


# ---- running a case ----------------------------------------------------------------------------

def _outside(box: Path, case: Case) -> dict:
    """The sandbox outside --out; for `accept --out X` X is the output too (a link named there may have its
    file replaced, as asked), so X and what it points to are left out, and X must keep its type."""
    snap = _snapshot(box, skip=box / "out")
    for name in case.writes:
        snap.pop(name, None)
    if case.family == "outputs":
        target = case.command[case.command.index("--out") + 1]
        snap.pop(target, None)
        if target == "link-to-victim":
            snap.pop("victim.txt", None)
    return snap


def _raw_html(text: str) -> list[str]:
    """What a Markdown viewer would render as HTML (or an autolink) in ``text`` (markdown-it-py, CommonMark with
    tables, when installed; else every ``<`` that could open a tag)."""
    try:
        from markdown_it import MarkdownIt
    except ImportError:
        return re.findall(r"<[A-Za-z/!?][^>\n]{0,40}", text)
    found, todo = [], list(MarkdownIt("commonmark").enable("table").parse(text))
    while todo:
        token = todo.pop()
        todo += token.children or []
        if token.type in ("html_inline", "html_block") or (token.type == "link_open" and token.markup == "autolink"):
            found.append(token.content)
    return found


def run_case(box: Path, case: Case, timeout: float) -> Case:
    kinds = {k: v[0] for k, v in _snapshot(box, skip=box / "out").items()}
    kept = {name: (box / name).read_bytes() for name in case.keep}
    outside = _outside(box, case)
    started = time.perf_counter()
    measured = case.limits is not None and os.path.exists("/usr/bin/time")
    rss = box.parent / f"{box.name}.rss"
    command = ["/usr/bin/time", "-q", "-o", str(rss), "-f", "%M", *case.command] if measured else case.command
    try:
        done = subprocess.run(command, cwd=box, capture_output=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
        case.exit, case.stderr = done.returncode, done.stderr.decode("utf-8", "replace")
    except subprocess.TimeoutExpired:
        case.problems.append(f"hang (no exit within {timeout:g} s)")
    case.seconds = time.perf_counter() - started
    if measured and case.exit is not None:
        megabytes = int(rss.read_text().split()[-1]) / 1024
        if case.seconds > case.limits[0] or megabytes > case.limits[1]:
            case.problems.append(f"over budget: {case.seconds:.1f} s, {megabytes:.0f} MB (at most "
                                 f"{case.limits[0]:g} s, {case.limits[1]:g} MB)")
    if case.report and (box / case.report).is_file() and _raw_html((box / case.report).read_text()):
        case.problems.append(f"raw HTML in {case.report}: {_raw_html((box / case.report).read_text())[:3]}")
    lines = [line for line in case.stderr.splitlines() if line.strip()]
    if case.exit == 1 or "Traceback" in case.stderr:
        case.problems.append("traceback")
    elif case.exit == 2 and not (len(lines) == 1 and lines[0].startswith("error: ")):
        case.problems.append(f"exit 2 with {len(lines)} stderr lines")
    elif case.exit not in (0, 2, None):
        case.problems.append(f"exit {case.exit}")
    if _outside(box, case) != outside:
        case.problems.append("a file outside --out changed")
    now = {k: v[0] for k, v in _snapshot(box, skip=box / "out").items()}
    replaced = [k for k, kind in kinds.items() if kind in ("fifo", "link") and now.get(k) != kind]
    if replaced:
        case.problems.append(f"special file(s) {', '.join(replaced)} replaced")
    for name, data in kept.items():
        path = box / name
        if not path.is_file() or path.is_symlink() or path.read_bytes() != data:
            case.problems.append(f"the user's {name} was deleted or replaced")
    if case.expect == "refuse" and case.exit == 0:
        case.problems.append("used silently (exit 0 where a refusal was due)")
    elif case.expect == "warn" and case.exit == 0 and not any(
            line.startswith(("note:", "warning:")) and re.search(case.said, line, re.I) for line in lines):
        case.problems.append(f"silent (exit 0 without a note or warning matching {case.said!r})")
    elif case.expect == "ok" and case.exit != 0:
        case.problems.append(f"a valid case refused: exit {case.exit}")
    notes = box / "out" / "notes.txt"
    if not notes.is_file() or notes.is_symlink() or notes.read_text() != "the user's\n":
        case.problems.append("the user's file in --out changed or was lost")
    for name, text in case.user_files.items():
        mine = box / "out" / name
        if not mine.is_file() or mine.is_symlink() or mine.read_text() != text:
            case.problems.append(f"the user's {name} in --out changed or was lost")
    for special in ("/dev/null", "/dev/full"):
        if os.path.exists(special) and not stat.S_ISCHR(os.lstat(special).st_mode):
            case.problems.append(f"{special} was replaced")
    return case


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cases", type=int, default=20, help="cases per family")
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--only", nargs="*", choices=FAMILIES)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    families = args.only or FAMILIES
    results: list[Case] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        os.environ["CALIBRATE_STATE_DIR"] = str(tmp / "state")  # the audit's own owner key, never the user's
        for family in families:
            if family == "kills":
                results += kills(tmp, rng, max(3, args.cases // 4), args.timeout)
                continue
            maker = {"recipes": recipes, "data": data, "calibrations": calibrations, "journals": journals,
                     "outputs": outputs, "ownership": ownership, "inputs": inputs, "cohorts": cohorts,
                     "tampered": tampered, "mistakes": mistakes}[family]
            for box, case in maker(tmp, rng, args.cases):
                results.append(run_case(box, case, args.timeout))
                shutil.rmtree(box, ignore_errors=True)
    print(f"audit seed {args.seed}: {len(results)} cases in {time.perf_counter() - started:.0f} s")
    print(f"{'family':<14}{'cases':>6}{'passed':>8}{'exit 0':>8}{'clean 2':>9}{'traceback':>11}{'hang':>6}{'damage':>8}"
          f"{'silent':>8}{'other':>7}")
    for family in families:
        rows = [c for c in results if c.family == family]
        tb = sum("traceback" in c.problems for c in rows)
        hang = sum(any(p.startswith("hang") for p in c.problems) for c in rows)
        damage = sum(any("changed" in p or "lost" in p or "replaced" in p for p in c.problems) for c in rows)
        silent = sum(any(p.startswith(("used silently", "silent")) for p in c.problems) for c in rows)
        failed = sum(bool(c.problems) for c in rows)
        print(f"{family:<14}{len(rows):>6}{sum(not c.problems for c in rows):>8}"
              f"{sum(c.exit == 0 and not c.problems for c in rows):>8}"
              f"{sum(c.exit == 2 and not c.problems for c in rows):>9}{tb:>11}{hang:>6}{damage:>8}{silent:>8}"
              f"{failed - max(tb, hang, damage, silent):>7}")
    failures = [c for c in results if c.problems]
    for c in failures:
        first = next((line for line in c.stderr.splitlines() if line.strip()), "")
        print(f"FAIL {c.family} / {c.what}: {'; '.join(c.problems)}\n     {' '.join(c.command[1:])}\n     {first[:200]}")
    if args.json:
        args.json.write_text(json.dumps([asdict(c) for c in results], indent=1))
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
