"""Ownership is proven, never claimed (issue 31, item 1): a file in --out is calibrate's to replace or
remove only when a record sealed with this user's key for this folder says calibrate wrote it there.

A journal or a manifest found in the folder, even one stating a user file's true size and SHA-256, owns
nothing by itself: the user's file survives every run (exit 2 naming what was refused, nothing changed).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from calibrate.files.manifest import MANIFEST, STAGING_PREFIX, read_manifest

from calibrate_test_helpers import invoke_cli, make_scores, score_recipe, write_recipe, write_scores


@pytest.fixture
def setup(tmp_path):
    values, probes, gallery = make_scores(seed=31, n_classes=8, probes_per_class=5)
    csv_path = write_scores(tmp_path / "scores.csv", values, probes, gallery)
    recipe = write_recipe(tmp_path / "r.yaml", score_recipe(csv_path, tmp_path / "unused", targets=(0.05,)))
    return tmp_path, recipe


def run(recipe: Path, out: Path, **kw):
    return invoke_cli("run", str(recipe), "--out", str(out), "-q", **kw)


def record(data: bytes) -> dict:
    return {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def one_error_line(done) -> str:
    """The one `error:` line of a refusal (exit 2; a note the run printed before it aside)."""
    assert done.returncode == 2, (done.returncode, done.stderr)
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert "Traceback" not in done.stderr
    return line


@pytest.mark.parametrize("previous_run", [False, True])
@pytest.mark.parametrize("name", ["notes.txt", "thresholds.csv"])
def test_a_planted_journal_with_a_true_hash_owns_nothing(setup, name, previous_run):
    """The reproduction: a journal naming the user's file as a new output of its commit, with its true hash."""
    tmp, recipe = setup
    out = tmp / "out"
    if previous_run:
        assert run(recipe, out).returncode == 0
    out.mkdir(exist_ok=True)
    mine = b"the user's own file\n"
    (out / name).write_bytes(mine)  # thresholds.csv after a run: the user's own version of it
    staging = out / (STAGING_PREFIX + "x")
    staging.mkdir()
    journal = {"files": [name], "replaces": {},
               "manifest": {"format": "calibrate-output", "files": {name: record(mine)}}}
    (staging / ".journal.json").write_text(json.dumps(journal))
    before = snapshot(out)
    line = one_error_line(run(recipe, out))
    assert ".journal.json" in line and "nothing was changed" in line and STAGING_PREFIX + "x" in line
    assert snapshot(out) == before
    # a journal written by a calibrate run of the same shape, stating the user's file among its replaced ones
    journal = {"files": [], "replaces": {name: record(mine)}, "manifest": {"format": "calibrate-output", "files": {}}}
    (staging / ".journal.json").write_text(json.dumps(journal))
    before = snapshot(out)
    one_error_line(run(recipe, out))
    assert snapshot(out) == before


def test_a_hand_written_manifest_with_a_true_hash_owns_nothing(setup):
    tmp, recipe = setup
    out = tmp / "out"
    out.mkdir()
    mine = b"my notes\n"
    (out / "notes.txt").write_bytes(mine)
    (out / MANIFEST).write_text(json.dumps({"format": "calibrate-output", "version": 1,
                                            "files": {"notes.txt": record(mine)}}))
    before = snapshot(out)
    line = one_error_line(run(recipe, out))
    assert MANIFEST in line and "move them away" in line
    assert snapshot(out) == before


def test_an_entry_added_to_calibrates_own_manifest_owns_nothing(setup):
    """A genuine manifest with the user's file added to it (true hash): the manifest is no longer the one
    calibrate wrote, so nothing in it is calibrate's; the run refuses and the user's file stays."""
    tmp, recipe = setup
    out = tmp / "out"
    assert run(recipe, out).returncode == 0
    mine = b"my notes\n"
    (out / "notes.txt").write_bytes(mine)
    doc = json.loads((out / MANIFEST).read_text())
    doc["files"]["notes.txt"] = record(mine)
    (out / MANIFEST).write_text(json.dumps(doc))
    before = snapshot(out)
    line = one_error_line(run(recipe, out))
    assert "thresholds.csv" in line and MANIFEST in line
    assert snapshot(out) == before
    assert read_manifest(out) is not None  # still a complete result to a loader: sizes and hashes match


def test_a_manifest_copied_from_another_run_owns_nothing_here(setup):
    """Seals are bound to the folder: another folder's genuine manifest, with a copy of one of its outputs
    (the user's now), proves nothing here."""
    tmp, recipe = setup
    elsewhere, out = tmp / "elsewhere", tmp / "out"
    assert run(recipe, elsewhere).returncode == 0
    out.mkdir()
    for name in (MANIFEST, "thresholds.csv"):
        shutil.copy(elsewhere / name, out / name)
    before = snapshot(out)
    line = one_error_line(run(recipe, out))
    assert "thresholds.csv" in line and "not sealed with your owner key for this folder" in line
    assert snapshot(out) == before
    # the whole result copied, or the folder moved: the same (said in docs/architecture.md)
    moved = tmp / "moved"
    elsewhere.rename(moved)
    before = snapshot(moved)
    line = one_error_line(run(recipe, moved))
    assert "moved or copied" in line and "delete them and manifest.json" in line
    assert snapshot(moved) == before
    assert read_manifest(moved) is not None  # still a complete result to a loader


def test_outputs_from_before_sealed_manifests_are_the_users(setup):
    """An unsealed manifest (calibrate before issue 31) owns nothing: refused like any other file, with the way
    out; once the user deletes those outputs the run goes ahead."""
    tmp, recipe = setup
    out = tmp / "out"
    assert run(recipe, out).returncode == 0
    doc = json.loads((out / MANIFEST).read_text())
    old = {**{k: v for k, v in doc.items() if k != "mac"}, "version": 1}
    (out / MANIFEST).write_text(json.dumps(old, indent=1) + "\n")
    before = snapshot(out)
    line = one_error_line(run(recipe, out))
    assert "from before sealed outputs" in line and "delete them and manifest.json" in line
    assert snapshot(out) == before
    for name in [*old["files"], MANIFEST]:
        (out / name).unlink()
    assert run(recipe, out).returncode == 0 and read_manifest(out)["version"] == 2


def test_a_rerun_replaces_its_own_sealed_result(setup):
    tmp, recipe = setup
    out = tmp / "out"
    assert run(recipe, out).returncode == 0
    first = json.loads((out / MANIFEST).read_text())
    (out / "notes.txt").write_text("mine\n")
    assert run(recipe, out).returncode == 0
    second = json.loads((out / MANIFEST).read_text())
    assert second["run_id"] != first["run_id"] and len(second["mac"]) == 64
    assert (out / "notes.txt").read_text() == "mine\n"


def test_a_journal_sealed_for_another_folder_is_refused(setup):
    """A genuine journal (as a killed run leaves it) moved into another folder finishes nothing there."""
    from calibrate.files.commit import StagedOutput

    tmp, recipe = setup
    staged = StagedOutput(tmp / "a")
    staged.write_text("thresholds.csv", "new\n")
    journal = {"files": ["thresholds.csv"], "replaces": {}, "manifest": staged._manifest()}
    journal["mac"] = staged.seal.of("journal", journal)
    staged.discard()
    out = tmp / "b"
    out.mkdir()
    (out / "thresholds.csv").write_text("new\n")  # the user's, with the very content the journal records
    staging = out / (STAGING_PREFIX + "x")
    staging.mkdir()
    (staging / ".journal.json").write_text(json.dumps(journal))
    before = snapshot(out)
    line = one_error_line(run(recipe, out))
    assert "not sealed with your owner key for this folder" in line and ".journal.json" in line
    assert snapshot(out) == before


# ---- the owner key ------------------------------------------------------------------------------

@pytest.fixture
def state(tmp_path, monkeypatch):
    """A fresh state folder for the owner key (the suite's own is in conftest.py)."""
    from calibrate.files import ownerkey

    folder = tmp_path / "state"
    monkeypatch.setenv(ownerkey.ENV, str(folder))
    monkeypatch.setattr(ownerkey, "_keys", {})
    return folder


def test_the_key_is_made_private_on_first_use_and_kept(setup, state):
    tmp, recipe = setup
    assert not state.exists()
    assert run(recipe, tmp / "out").returncode == 0
    key = state / "owner.key"
    assert oct(state.stat().st_mode & 0o777) == oct(0o700) and oct(key.stat().st_mode & 0o777) == oct(0o600)
    text = key.read_text()
    assert len(text) == 65 and [p.name for p in state.iterdir()] == ["owner.key"]
    from calibrate.files import ownerkey

    ownerkey._keys.clear()  # a later process reads the same key: its outputs are still calibrate's
    assert run(recipe, tmp / "out").returncode == 0 and key.read_text() == text


def test_the_default_key_lives_in_the_users_state_folder(monkeypatch, tmp_path):
    from calibrate.files import ownerkey

    monkeypatch.delenv(ownerkey.ENV)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert ownerkey.key_path() == tmp_path / "xdg" / "calibrate" / "owner.key"
    monkeypatch.setenv("XDG_STATE_HOME", "relative")  # not absolute: ignored, as the XDG spec says
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert ownerkey.key_path() == tmp_path / "home" / ".local" / "state" / "calibrate" / "owner.key"


@pytest.mark.parametrize("damage", ["malformed", "empty", "shared", "folder", "unwritable", "relative", "dangling"])
def test_a_key_that_cannot_be_read_or_made_is_one_line_and_changes_nothing(setup, state, damage):
    tmp, recipe = setup
    key = state / "owner.key"
    env_value = str(state)
    if damage == "unwritable":
        state.write_text("a file where the state folder should be\n")  # runs as root too: no chmod trick
        key = state / "owner.key"
    elif damage == "relative":
        env_value = "state"
    else:
        state.mkdir(mode=0o700)
        if damage == "folder":
            key.mkdir()
        elif damage == "dangling":  # it said "vanished while it was made; run again", and again at every run
            key.symlink_to(state / "nowhere")
        else:
            key.write_text({"malformed": "not a key\n", "empty": "", "shared": "ab" * 32 + "\n"}[damage])
            key.chmod(0o644 if damage == "shared" else 0o600)
    out = tmp / "out"
    done = run(recipe, out, env={"CALIBRATE_STATE_DIR": env_value})
    line = one_error_line(done)
    assert "CALIBRATE_STATE_DIR" in line
    if damage != "relative":
        assert str(key) in line
    assert not out.exists()
    if damage == "shared":
        assert "chmod 600" in line
    if damage == "dangling":
        assert "a symbolic link to nothing" in line and "run again" not in line


def test_runs_starting_together_on_a_fresh_machine_agree_on_one_key(tmp_path):
    """Made under a random name and linked into place: every racer ends with the key that was linked first."""
    state = tmp_path / "state"
    code = "from calibrate.files.ownerkey import owner_key; print(owner_key().hex())"
    env = {**os.environ, "CALIBRATE_STATE_DIR": str(state)}
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env)
             for _ in range(6)]
    keys = {p.communicate(timeout=60)[0].strip() for p in procs}
    assert all(p.returncode == 0 for p in procs)
    assert keys == {(state / "owner.key").read_text().strip()}
    assert [p.name for p in state.iterdir()] == ["owner.key"]  # no temporaries left


def test_reading_a_result_needs_no_key(setup, state, monkeypatch):
    """read_manifest (the loaders' integrity check) works on a folder copied to another machine or account."""
    tmp, recipe = setup
    out = tmp / "out"
    assert run(recipe, out).returncode == 0
    from calibrate.files import ownerkey

    monkeypatch.setenv(ownerkey.ENV, str(tmp / "another-machine"))
    monkeypatch.setattr(ownerkey, "_keys", {})
    manifest = read_manifest(out)
    assert manifest is not None and "thresholds.csv" in manifest["files"]
    assert not (tmp / "another-machine").exists()
