"""Output safety: a run writes only its own files into --out, as one file set behind manifest.json.

What a user relies on: files of theirs in the output folder survive any run (successful, failed,
killed) with their permissions; a folder never holds a result that looks complete but is not
(manifest.json present means every file it lists is there, whole, from one run); two runs into
one folder end with one run's complete result.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import calibrate
from calibrate.files.commit import StagedOutput
from calibrate.files.manifest import MANIFEST, STAGING_PREFIX, OutputError, read_manifest

from calibrate_test_helpers import invoke_cli, make_scores, score_recipe, write_recipe, write_scores

OUTPUTS = {"thresholds.csv", "results.json", "report.md", "models.csv", "calibration.json", "det.csv", MANIFEST}


def user_files(folder: Path) -> dict[str, tuple[bytes, int]]:
    """The user's own files in ``folder`` (everything not written by calibrate): content and mode."""
    (folder / "my-notes.txt").write_text("mine, do not touch\n")
    (folder / "sub").mkdir()
    (folder / "sub" / "data.bin").write_bytes(b"\x00\x01 keep")
    os.chmod(folder, 0o751)
    return snapshot_user(folder)


def snapshot_user(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {"my-notes.txt": ((folder / "my-notes.txt").read_bytes(), (folder / "my-notes.txt").stat().st_mode),
            "sub/data.bin": ((folder / "sub" / "data.bin").read_bytes(), (folder / "sub" / "data.bin").stat().st_mode),
            ".": (b"", folder.stat().st_mode)}


@pytest.fixture
def score_setup(tmp_path):
    values, probes, gallery = make_scores(seed=21, n_classes=10, probes_per_class=6)
    csv_path = write_scores(tmp_path / "scores.csv", values, probes, gallery)
    return tmp_path, csv_path


def test_a_run_leaves_the_users_files_and_folder_mode_alone(score_setup):
    tmp, csv_path = score_setup
    out = tmp / "out"
    out.mkdir()
    before = user_files(out)
    recipe = write_recipe(tmp / "r.yaml", score_recipe(csv_path, out))
    for _ in range(2):  # a first run and a rerun over its own result
        calibrate.run(recipe)
        assert snapshot_user(out) == before
        assert stat.S_IMODE(out.stat().st_mode) == 0o751
        manifest = read_manifest(out)
        assert manifest is not None and set(manifest["files"]) == OUTPUTS - {MANIFEST}, manifest["files"]
        assert {p.name for p in out.iterdir()} == OUTPUTS | {"my-notes.txt", "sub"}


def test_out_dot_keeps_the_current_folder(score_setup):
    tmp, csv_path = score_setup
    work = tmp / "work"
    work.mkdir()
    before = user_files(work)
    recipe = write_recipe(tmp / "r.yaml", score_recipe(csv_path, tmp / "unused"))
    done = invoke_cli("run", str(recipe), "--out", ".", "--quiet", cwd=work)
    assert done.returncode == 0, done.stderr
    assert snapshot_user(work) == before
    assert read_manifest(work) is not None
    assert not (tmp / "unused").exists()


def test_new_files_follow_the_umask_not_a_private_temporary_mode(score_setup):
    tmp, csv_path = score_setup
    out = tmp / "fresh" / "deeper"
    calibrate.run(write_recipe(tmp / "r.yaml", score_recipe(csv_path, out)))
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(out.stat().st_mode) == 0o777 & ~umask
    assert stat.S_IMODE((out / "thresholds.csv").stat().st_mode) == 0o666 & ~umask


def test_a_file_of_an_output_name_that_calibrate_did_not_write_is_refused_before_any_work(score_setup, monkeypatch):
    tmp, csv_path = score_setup
    out = tmp / "out"
    out.mkdir()
    (out / "report.md").write_text("my own report")
    recipe = write_recipe(tmp / "r.yaml", score_recipe(csv_path, out))
    import calibrate_builtins.datasets.score_matrix as sm

    def boom(*a, **k):
        raise AssertionError("the dataset was read although the folder was going to be refused")

    monkeypatch.setattr(sm.ScoreMatrixDataset, "_load", boom)
    with pytest.raises(OutputError, match=r"already holds report\.md.*move them away or choose another folder"):
        calibrate.run(recipe)
    assert [p.name for p in out.iterdir()] == ["report.md"]
    assert (out / "report.md").read_text() == "my own report"


def test_refusal_is_exit_2_with_one_line(score_setup):
    tmp, csv_path = score_setup
    out = tmp / "out"
    out.mkdir()
    (out / "thresholds.csv").write_text("x")
    done = invoke_cli("run", str(write_recipe(tmp / "r.yaml", score_recipe(csv_path, out))), "--quiet")
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "thresholds.csv" in done.stderr
    target = tmp / "a-file"
    target.write_text("x")
    done = invoke_cli("run", str(tmp / "r.yaml"), "--out", str(target), "--quiet")
    assert done.returncode == 2 and "is a file, not a folder" in done.stderr
    assert target.read_text() == "x"


@pytest.mark.parametrize("link", [False, True])
def test_files_named_like_outputs_without_a_manifest_are_the_users(score_setup, link):
    """D1: no ownership by name: a results.json of the old shape does not make report.md calibrate's."""
    tmp, csv_path = score_setup
    out = tmp / "out"
    out.mkdir()
    victim = tmp / "victim.txt"
    victim.write_text("victim\n")
    (out / "results.json").write_text(json.dumps({"estimators": 1, "recipe": 1, "versions": 1}))
    (out / "report.md").write_text("notes\n")
    if link:
        (out / "thresholds.csv").symlink_to(victim)
    else:
        (out / "thresholds.csv").write_text("mine\n")
    result = _cli_run(write_recipe(tmp / "r.yaml", score_recipe(csv_path, out)), out)
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert "report.md" in line and "results.json" in line and "thresholds.csv" in line
    assert (out / "report.md").read_text() == "notes\n" and victim.read_text() == "victim\n"
    assert (out / "thresholds.csv").is_symlink() == link


def test_a_rerun_removes_only_what_the_previous_run_wrote(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    first = StagedOutput(out)
    for name in ("thresholds.csv", "thresholds-fold1.csv", "det.png"):
        first.write_text(name, f"first {name}")
    assert not (out / "thresholds.csv").exists()  # nothing visible before commit
    first.commit()
    second = StagedOutput(out)
    second.write_text("thresholds.csv", "second")
    second.commit()
    assert {p.name for p in out.iterdir()} == {MANIFEST, "keep.txt", "thresholds.csv"}
    assert (out / "thresholds.csv").read_text() == "second"
    assert set(read_manifest(out)["files"]) == {"thresholds.csv"}


def test_a_failed_run_into_a_new_folder_leaves_nothing(tmp_path):
    staged = StagedOutput(tmp_path / "a" / "b")
    staged.write_bytes("x.png", b"\x89PNG")
    staged.discard()
    assert list(tmp_path.iterdir()) == []


def test_a_commit_killed_half_way_is_finished_by_the_next_run(tmp_path, monkeypatch):
    out = tmp_path / "out"
    old = StagedOutput(out)
    old.write_text("thresholds.csv", "old")
    old.write_text("report.md", "old")
    old.commit()
    new = StagedOutput(out)
    new.write_text("thresholds.csv", "new")
    new.write_text("report.md", "new")
    import calibrate.files.commit as commit

    real_replace, calls = os.replace, []

    def dies_after_one(src, dst):
        calls.append(dst)
        if len(calls) > 3:  # the journal, the old manifest set aside, one new file: then the kill
            raise KeyboardInterrupt  # stands for SIGKILL: nothing after this point runs
        real_replace(src, dst)

    monkeypatch.setattr(commit.os, "replace", dies_after_one)
    with pytest.raises(KeyboardInterrupt):
        new.commit()
    monkeypatch.setattr(commit.os, "replace", real_replace)
    assert not (out / MANIFEST).exists()  # a mix of old and new files that does not claim to be complete
    assert read_manifest(out) is None
    new._release()  # the killed process's lock goes with it
    victim = tmp_path / "victim.txt"
    victim.write_text("victim\n")
    (new.dir / (MANIFEST + ".tmp")).symlink_to(victim)  # D4: the old fixed temporary name, planted
    StagedOutput(out).discard()  # any later run first finishes the interrupted commit
    assert victim.read_text() == "victim\n" and not (out / MANIFEST).is_symlink()
    assert read_manifest(out) is not None
    assert (out / "thresholds.csv").read_text() == "new" and (out / "report.md").read_text() == "new"
    assert not list(out.glob(STAGING_PREFIX + "*"))


def test_staging_of_a_live_run_is_left_alone_and_of_a_dead_one_removed(tmp_path):
    out = tmp_path / "out"
    alive = StagedOutput(out)
    alive.write_text("thresholds.csv", "alive")
    other = StagedOutput(out)  # a second run starting meanwhile
    assert alive.dir.exists()
    other.discard()
    alive._release()  # its process dies before committing
    StagedOutput(out).discard()
    assert not alive.dir.exists() and list(out.iterdir()) == []


# ---- kills and races in real processes ----------------------------------------------------------

WRITER = textwrap.dedent("""
    import sys
    from calibrate.files.commit import StagedOutput
    out, tag, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    for i in range(rounds):
        staged = StagedOutput(out)
        # a varying number of files of varying size: every file carries the run that wrote it
        for k in range(1 + i % 4):
            staged.write_text(f"part{k}.csv", f"{tag}:{i}\\n" * (1 + 500 * k))
        staged.write_text("results.json", f"{tag}:{i}\\n")
        staged.commit()
        print(i, flush=True)
""")


def check_folder(out: Path, user: dict) -> str | None:
    """The invariants after any kill: user files intact, and either no manifest or a true one from one run."""
    assert snapshot_user(out) == user
    if not (out / MANIFEST).exists():
        return None
    manifest = read_manifest(out)
    assert manifest is not None, "manifest.json present but the files do not match it: a partial result looks complete"
    tags = {(out / name).read_text().split("\n", 1)[0] for name in manifest["files"]}
    assert len(tags) == 1, f"files from different runs behind one manifest: {tags}"
    return tags.pop()


def test_a_late_writer_while_the_staging_folder_is_removed_leaves_nothing(tmp_path, monkeypatch):
    """A worker still busy when a run failed writes by the staging folder's name (write_staged) at the worst moment:
    after the folder was emptied, before it is removed. Nothing may be left behind (issue 41)."""
    from calibrate.contract.sharded import write_staged

    out = tmp_path / "out"
    staged = StagedOutput(out)
    staging = staged.dir
    write_staged(staging, "thresholds-part00000.csv", "early\n")
    real_rmdir, late = os.rmdir, []

    def rmdir_after_a_late_write(path, *args, **kwargs):
        try:
            late.append(write_staged(staging, "thresholds-part00001.csv", "late\n"))
        except OSError as exc:
            late.append(exc)
        return real_rmdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "rmdir", rmdir_after_a_late_write)
    staged.discard()
    monkeypatch.undo()
    assert late and isinstance(late[0], FileNotFoundError), late  # the late write found no folder to write into
    assert not out.exists(), sorted(p.name for p in out.rglob("*"))


FORKING_RUN = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    from calibrate.files.commit import StagedOutput
    from calibrate.running import beside

    out, release = sys.argv[1], Path(sys.argv[2])

    ready = release.with_name("ready")

    def long_job():  # the predicted intervals, computed beside the run: here until the test releases it
        ready.touch()  # the child runs (fork's hooks, which close the run's locks, are behind it)
        while not release.exists():
            time.sleep(0.01)

    staged = StagedOutput(out)
    job = beside.start(long_job, "a long job")
    while not ready.exists():  # killed before the child runs at all, the lock would be its until then
        time.sleep(0.01)
    print(job._process.pid, flush=True)
    time.sleep(600)  # killed by the test
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the work beside a run forks on Linux only")
def test_a_killed_run_child_beside_it_does_not_keep_its_staging_folder_locked(tmp_path):
    """A run killed while its prediction runs in a forked child: the child must not hold the run's staging lock, or
    the next run takes the dead run's staging folder for a live one's and leaves it (issue 41: a kill-timing test)."""
    import psutil

    out, release = tmp_path / "out", tmp_path / "release"
    script = tmp_path / "forking_run.py"
    script.write_text(FORKING_RUN)
    proc = subprocess.Popen([sys.executable, str(script), str(out), str(release)], stdout=subprocess.PIPE, text=True)
    child = psutil.Process(int(proc.stdout.readline()))  # the run has its staging folder and its child
    try:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        assert child.is_running() and len(list(out.glob(STAGING_PREFIX + "*"))) == 1  # the child lives on
        StagedOutput(out).discard()  # the next run: recovers what the dead one left, then fails itself
        assert not list(out.glob(STAGING_PREFIX + "*")), sorted(p.name for p in out.iterdir())
    finally:
        release.touch()
        child.wait(timeout=60)


def test_sigkill_at_random_moments_never_leaves_a_complete_looking_partial_result(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    user = user_files(out)
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    rng = np.random.default_rng(20261123)
    seen = set()
    for kill in range(12):
        proc = subprocess.Popen([sys.executable, str(script), str(out), f"k{kill}", "100000"],
                                stdout=subprocess.PIPE, text=True)
        proc.stdout.readline()  # at least one commit happened, so kills land among commits
        time.sleep(float(rng.uniform(0.0, 0.05)))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        seen.add(check_folder(out, user) is None)
        # the next run first finishes or clears what the killed one left
        StagedOutput(out).discard()
        assert check_folder(out, user) is not None
        assert not list(out.glob(STAGING_PREFIX + "*"))
    assert stat.S_IMODE(out.stat().st_mode) == 0o751


def test_two_concurrent_runs_end_with_one_runs_complete_result(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    user = user_files(out)
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    procs = [subprocess.Popen([sys.executable, str(script), str(out), tag, "40"], stdout=subprocess.DEVNULL)
             for tag in ("A", "B")]
    for p in procs:
        assert p.wait(timeout=120) == 0
    tag = check_folder(out, user)
    assert tag in {"A:39", "B:39"}
    assert not list(out.glob(STAGING_PREFIX + "*"))


def test_two_concurrent_cli_runs_into_one_folder(score_setup):
    tmp, csv_path = score_setup
    out = tmp / "out"
    out.mkdir()
    user = user_files(out)
    recipes = []
    for seed in (1, 2):
        r = score_recipe(csv_path, out)
        r["data"]["seed"] = seed
        recipes.append(write_recipe(tmp / f"r{seed}.yaml", r))
    from calibrate_test_helpers import CALIBRATE

    procs = [subprocess.Popen([str(CALIBRATE), "run", str(r), "--quiet"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True) for r in recipes]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    assert snapshot_user(out) == user
    manifest = read_manifest(out)
    assert manifest is not None
    seed = json.loads((out / "results.json").read_text())["recipe"]["data"]["seed"]
    # the thresholds are those of the run whose results.json is there
    alone = tmp / f"alone{seed}"
    calibrate.run(recipes[seed - 1], out=alone)
    assert (out / "thresholds.csv").read_text() == (alone / "thresholds.csv").read_text()


def test_killed_cli_runs_leave_the_previous_complete_result_or_none(score_setup):
    tmp, csv_path = score_setup
    out = tmp / "out"
    out.mkdir()
    user = user_files(out)
    from calibrate_test_helpers import CALIBRATE

    recipe = write_recipe(tmp / "r.yaml", score_recipe(csv_path, out))
    rng = np.random.default_rng(7)
    previous = None
    for _ in range(3):
        proc = subprocess.Popen([str(CALIBRATE), "run", str(recipe), "--quiet"], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        time.sleep(float(rng.uniform(0.2, 2.5)))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert snapshot_user(out) == user
        manifest = read_manifest(out)
        assert (out / MANIFEST).exists() == (manifest is not None), "manifest present but files do not match it"
        if manifest is not None and previous is not None and manifest["run_id"] != previous:
            assert set(manifest["files"]) == OUTPUTS - {MANIFEST}  # a later complete result, never a partial one
        previous = manifest["run_id"] if manifest else previous
    done = invoke_cli("run", str(recipe), "--quiet")
    assert done.returncode == 0, done.stderr
    assert read_manifest(out) is not None and snapshot_user(out) == user
    assert not list(out.glob(STAGING_PREFIX + "*"))


# ---- untrusted journals and manifests (issue 19, items 1, 2 and 7) -----------------------------------

def _cli_run(recipe: Path, out: Path):
    from typer.testing import CliRunner

    from calibrate.cli.commands import app

    return CliRunner().invoke(app, ["run", str(recipe), "--out", str(out), "-q"])


def _plant(out: Path, journal: dict | str) -> Path:
    staging = out / (STAGING_PREFIX + "evil")
    staging.mkdir(parents=True)
    (staging / ".journal.json").write_text(journal if isinstance(journal, str) else json.dumps(journal))
    return staging


EMPTY_MANIFEST = {"format": "calibrate-output", "version": 1, "files": {}}


@pytest.mark.parametrize("journal", [
    {"files": [], "replaces": ["../victim.txt"], "manifest": EMPTY_MANIFEST},           # the audit's reproduction
    {"files": [], "replaces": {"../victim.txt": {"bytes": 7, "sha256": "0" * 64}}, "manifest": EMPTY_MANIFEST},
    {"files": [], "replaces": {"my-notes.txt": {"bytes": 1, "sha256": "0" * 64}}, "manifest": EMPTY_MANIFEST},
    {"files": ["../victim.txt"], "replaces": {}, "manifest": {**EMPTY_MANIFEST, "files": {"../victim.txt": {}}}},
    {"files": ["my-notes.txt"], "replaces": {}, "manifest": {**EMPTY_MANIFEST, "files": {"my-notes.txt": {}}}},
    {"files": [], "replaces": {}, "manifest": {**EMPTY_MANIFEST, "files": {"ghost.csv": {"bytes": 1, "sha256": "0" * 64}}}},
    {"files": [["a"]], "replaces": {}, "manifest": EMPTY_MANIFEST},  # T15: entries of the wrong type
    {"files": [{}], "replaces": {}, "manifest": EMPTY_MANIFEST},
    "[1, 2", "null", "[" * 100_000,  # the last: nested too deeply, named as the journal, not the recipe
])
def test_a_planted_journal_touches_nothing_and_is_reported(score_setup, journal):
    tmp, csv_path = score_setup
    out = tmp / "out"
    out.mkdir()
    victim = tmp / "victim.txt"
    victim.write_text("victim\n")
    user = user_files(out)
    staging = _plant(out, journal)
    result = _cli_run(write_recipe(tmp / "r.yaml", score_recipe(csv_path, out)), out)
    if isinstance(journal, dict):  # a journal calibrate cannot have written: exit 2 naming it, left in place
        assert result.exit_code == 2, result.output
        (line,) = result.stderr.strip().splitlines()
        assert ".journal.json" in line and "nothing was changed" in line and "remove '.calibrate-staging-evil'" in line
        assert (staging / ".journal.json").exists() and not (out / MANIFEST).exists()
    else:  # unreadable: the same refusal
        assert result.exit_code == 2 and ".journal.json" in result.stderr and "r.yaml" not in result.stderr
    assert victim.read_text() == "victim\n"
    assert snapshot_user(out) == user


def test_a_tampered_manifest_is_reported_and_left_in_place(score_setup):
    tmp, csv_path = score_setup
    out = tmp / "out"
    recipe = write_recipe(tmp / "r.yaml", score_recipe(csv_path, out))
    assert _cli_run(recipe, out).exit_code == 0
    (out / "notes.txt").write_text("the user's\n")
    doc = json.loads((out / MANIFEST).read_text())
    doc["files"]["notes.txt"] = {"bytes": 1, "sha256": "x"}  # the audit's tampering
    (out / MANIFEST).write_text(json.dumps(doc))
    tampered = (out / MANIFEST).read_bytes()
    result = _cli_run(recipe, out)
    assert result.exit_code == 2 and MANIFEST in result.stderr and "left it in place" in result.stderr
    assert (out / "notes.txt").read_text() == "the user's\n" and (out / MANIFEST).read_bytes() == tampered
    (out / MANIFEST).write_text(json.dumps({**doc, "files": {k: v for k, v in doc["files"].items() if k != "notes.txt"}}))
    # an output the user edited after the run is theirs now: never replaced, the run says so
    (out / "report.md").write_text("my edited report\n")
    result = _cli_run(recipe, out)
    assert result.exit_code == 2 and "report.md" in result.stderr and "changed since" in result.stderr
    assert (out / "report.md").read_text() == "my edited report\n"


@pytest.mark.parametrize("damage", ["utf-16", "files-list", "huge-int"])
def test_a_damaged_manifest_is_exit_2_naming_it_and_owns_nothing(score_setup, damage):
    """D2: an unreadable manifest does not fall back to ownership by name."""
    tmp, csv_path = score_setup
    out = tmp / "out"
    recipe = write_recipe(tmp / "r.yaml", score_recipe(csv_path, out))
    assert _cli_run(recipe, out).exit_code == 0
    with open(out / "report.md", "a") as fh:
        fh.write("EDIT\n")
    text = (out / MANIFEST).read_text()
    if damage == "utf-16":
        (out / MANIFEST).write_bytes(text.encode("utf-16"))
    elif damage == "files-list":
        (out / MANIFEST).write_text(json.dumps({**json.loads(text), "files": [1]}))
    else:
        (out / MANIFEST).write_text(text.replace('"bytes": ', '"bytes": ' + "9" * 5000, 1))
    damaged = (out / MANIFEST).read_bytes()
    result = _cli_run(recipe, out)
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert MANIFEST in line
    assert (out / "report.md").read_text().endswith("EDIT\n") and (out / MANIFEST).read_bytes() == damaged


@pytest.mark.parametrize("name", [MANIFEST, "results.json"])
@pytest.mark.parametrize("what", ["fifo", "dev-zero"])
def test_a_fifo_or_endless_file_in_the_folder_is_never_read(tmp_path, name, what):
    """H1/H2/M1: files read from the output folder are opened only if regular, within a budget."""
    import threading

    out = tmp_path / "out"
    out.mkdir()
    if what == "fifo":
        os.mkfifo(out / name)
    else:
        (out / name).symlink_to("/dev/zero")
    errors = []

    def start():
        try:
            StagedOutput(out).discard()
        except OutputError as exc:
            errors.append(str(exc))

    worker = threading.Thread(target=start, daemon=True)
    worker.start()
    worker.join(20)
    hung = worker.is_alive()
    if hung and what == "fifo":
        with open(out / name, "w"):
            pass  # let the blocked reader go
    assert not hung
    assert len(errors) == 1 and name in errors[0]


def test_a_planted_journal_cannot_remove_a_file_it_states_the_hash_of(score_setup):
    """D3: a journal replaces or removes only what the folder's manifest owns."""
    import hashlib

    tmp, csv_path = score_setup
    out = tmp / "out"
    recipe = write_recipe(tmp / "r.yaml", score_recipe(csv_path, out))
    for first_run in (False, True):
        if first_run:
            assert _cli_run(recipe, out).exit_code == 0
        out.mkdir(exist_ok=True)
        (out / "notes.txt").write_text("my notes\n")
        record = {"bytes": 9, "sha256": hashlib.sha256(b"my notes\n").hexdigest()}
        staging = _plant(out, {"files": [], "replaces": {"notes.txt": record}, "manifest": EMPTY_MANIFEST})
        result = _cli_run(recipe, out)
        assert result.exit_code == 2 and ".journal.json" in result.stderr, result.output
        assert (out / "notes.txt").read_text() == "my notes\n"
        import shutil
        shutil.rmtree(staging)


def test_a_staging_named_folder_holding_more_than_staged_files_is_left_alone(tmp_path):
    """The borderline case: a .calibrate-staging-* folder without a journal is removed only when it holds
    nothing but regular files a run stages."""
    out = tmp_path / "out"
    mine = out / (STAGING_PREFIX + "x")  # not a name mkdtemp gives
    mine.mkdir(parents=True)
    (mine / "notes.txt").write_text("keep")
    nested = out / (STAGING_PREFIX + "abcd1234")  # such a name, but holding a folder
    (nested / "sub").mkdir(parents=True)
    (nested / "sub" / "keep.txt").write_text("keep")
    dead = StagedOutput(out)
    dead.write_text("thresholds.csv", "staged")
    dead._release()  # its process dies before committing
    StagedOutput(out).discard()
    assert (mine / "notes.txt").read_text() == "keep" and (nested / "sub" / "keep.txt").read_text() == "keep"
    assert not dead.dir.exists()


def test_disk_full_while_staging_is_one_line_and_keeps_the_folder(score_setup, monkeypatch):
    import errno

    import calibrate.files.commit as commit

    tmp, csv_path = score_setup
    out = tmp / "out"
    recipe = write_recipe(tmp / "r.yaml", score_recipe(csv_path, out))
    assert _cli_run(recipe, out).exit_code == 0
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(commit.os, "fsync", full)
    result = _cli_run(recipe, out)
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert "No space left on device" in line and "free disk space" in line
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    assert not list(out.glob(STAGING_PREFIX + "*"))


@pytest.mark.parametrize("case", ["loop", "long", "nul-recipe", "empty-recipe"])  # argv cannot hold a NUL
def test_an_output_folder_name_that_cannot_be_used_is_one_line(score_setup, case):
    """T16, S7: a symbolic-link loop, an over-long name, a NUL byte, `output: ''` (the recipe's own folder)."""
    from typer.testing import CliRunner

    from calibrate.cli.commands import app

    tmp, csv_path = score_setup
    (tmp / "lp").symlink_to("lp")
    out = {"loop": str(tmp / "lp"), "long": str(tmp / ("a" * 300))}.get(case)
    raw = score_recipe(csv_path, tmp / "results")
    if case.endswith("recipe"):
        raw["output"] = {"dir": "a\0b" if case == "nul-recipe" else "", "plots": False}
    recipe = write_recipe(tmp / "r.yaml", raw)
    before = sorted(p.name for p in tmp.iterdir())
    args = ["run", str(recipe), "-q"] + (["--out", out] if out else [])
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: ") and ("output" in line or "--out" in line)
    assert sorted(p.name for p in tmp.iterdir()) == before


@pytest.mark.parametrize("kind", ["file", "folder"])
def test_a_planted_set_aside_manifest_is_refused_before_anything_changes(tmp_path, kind):
    """The name a commit sets the old manifest aside under is never taken over from a stranger."""
    from calibrate.files.manifest import PREVIOUS

    out = tmp_path / "out"
    first = StagedOutput(out)
    first.write_text("thresholds.csv", "first")
    first.commit()
    if kind == "folder":
        (out / PREVIOUS).mkdir()
    else:
        (out / PREVIOUS).write_text("planted")
    with pytest.raises(OutputError, match=PREVIOUS.replace(".", r"\.")):
        StagedOutput(out)
    assert (out / "thresholds.csv").read_text() == "first" and read_manifest(out) is not None
