"""Progress reporting (calibrate/contract/progress.py, RunContext.stage/track/map, the executors' on_done).

Plain lines are driven by a fake clock (no sleeps, no wall-clock asserts); the CLI is run in-process
(CliRunner), whose stderr is not a terminal, with CALIBRATE_PROGRESS_INTERVAL=0."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

from calibrate.contract.base import Executor, RunContext
from calibrate.contract.progress import (INTERVAL_VARIABLE, LogReporter, Reporter, RichReporter, Task, format_duration,
                                interval_from_env, make_reporter)
from calibrate_builtins.executors.local import Processes, Serial
from calibrate_test_helpers import invoke_cli

ROOT = Path(__file__).resolve().parents[1]


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def log(interval: float = 10.0) -> tuple[LogReporter, io.StringIO, FakeClock]:
    stream, clock = io.StringIO(), FakeClock()
    return LogReporter(stream, interval=interval, clock=clock), stream, clock


class Recorder(Reporter):
    """Records every stage and every advance."""

    def __init__(self) -> None:
        self.stages: list[dict] = []

    def start(self, description, total=None, unit="", depth=0) -> Task:
        record = {"description": description, "total": total, "unit": unit, "depth": depth, "advances": [],
                  "ok": None}
        self.stages.append(record)

        class _Task(Task):
            def advance(self, n=1):
                record["advances"].append(n)

            def finish(self, ok=True):
                record["ok"] = ok

        return _Task()


def _square(x: int) -> int:
    return x * x


# -- the plain line logger -------------------------------------------------------------------------

def test_log_reporter_start_periodic_end_lines_with_count_rate_eta():
    reporter, stream, clock = log(interval=10)
    task = reporter.start("ncx2-grid (exact): fitting 500 classes", 500, "classes")
    clock.now += 4
    task.advance(50)  # 4 s after the start: less than the interval, no line
    clock.now += 16
    task.advance(50)  # 20 s: 100 of 500 at 5 classes/s, 80 s to go
    clock.now += 5
    task.advance(100)  # 5 s after the last line: none
    clock.now += 75
    task.advance(300)  # complete: the end line says it
    task.finish()
    lines = stream.getvalue().splitlines()
    assert lines == [
        "progress: ncx2-grid (exact): fitting 500 classes: started (500 classes)",
        "progress: ncx2-grid (exact): fitting 500 classes: 100/500 classes (20%), 5 classes/s, elapsed 20s, ETA 1m20s",
        "progress: ncx2-grid (exact): fitting 500 classes: done, 500 classes in 1m40s (5 classes/s)",
    ]


def test_log_reporter_interval_zero_prints_every_update_and_slow_rates_per_item():
    reporter, stream, clock = log(interval=0)
    task = reporter.start("reading images", 4, "images")
    for _ in range(3):
        clock.now += 2.5
        task.advance(1)
    clock.now += 2.5
    task.advance(1)
    task.finish()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 5  # start, three periodic (the fourth completes the stage), end
    assert lines[1] == "progress: reading images: 1/4 images (25%), 2.5 s/image, elapsed 2.5s, ETA 7.5s"
    assert lines[3].endswith("3/4 images (75%), 2.5 s/image, elapsed 7.5s, ETA 2.5s")
    assert lines[4] == "progress: reading images: done, 4 images in 10s (2.5 s/image)"


def test_log_reporter_unknown_total_and_failure():
    reporter, stream, clock = log(interval=0)
    task = reporter.start("distances")
    clock.now += 2
    task.advance(10)
    clock.now += 2
    task.finish(ok=False)
    lines = stream.getvalue().splitlines()
    assert lines[0] == "progress: distances: started"
    assert lines[1] == "progress: distances: 10 items, 5 items/s, elapsed 2.0s"
    assert lines[2] == "progress: distances: stopped after 4.0s (10 items)"


def test_the_heartbeat_writes_the_running_stage_at_the_interval_whether_or_not_it_advances():
    """Issue 32: the S-norm stage printed "started" and two minutes later "done", nothing between, although the
    help promises a line every 10 s. The heartbeat (here called by hand, on a fake clock) writes the innermost
    running stage's line at the interval: how long it has run, and once it counts, its count and rate."""
    reporter, stream, clock = log(interval=10)
    outer = reporter.start("snorm: normalising 2,000 comparisons", 2000, "comparisons")
    clock.now += 9
    reporter.beat()  # not due yet
    clock.now += 1
    reporter.beat()
    clock.now += 4
    outer.advance(1000)  # 4 s after the last line: none
    clock.now += 6
    reporter.beat()
    inner = reporter.start("reading images", None, "images")
    clock.now += 10
    reporter.beat()  # the innermost stage only
    inner.finish()
    outer.finish()
    assert stream.getvalue().splitlines() == [
        "progress: snorm: normalising 2,000 comparisons: started (2,000 comparisons)",
        "progress: snorm: normalising 2,000 comparisons: 0/2,000 comparisons so far, elapsed 10s",
        "progress: snorm: normalising 2,000 comparisons: 1,000/2,000 comparisons (50%), 50 comparisons/s, "
        "elapsed 20s, ETA 20s",
        "progress: reading images: started",
        "progress: reading images: 0 images so far, elapsed 10s",
        "progress: reading images: done, in 10s",
        "progress: snorm: normalising 2,000 comparisons: done, 2,000 comparisons in 30s (66.7 comparisons/s)",
    ]
    reporter.beat()  # nothing open: nothing written
    assert len(stream.getvalue().splitlines()) == 7


def test_without_announce_a_stage_is_shown_once_its_first_line_is_due():
    """The score-list commands' reporter: a stage done within the interval says nothing; a longer one gets its
    periodic lines (count and rate) and its end."""
    stream, clock = io.StringIO(), FakeClock()
    reporter = LogReporter(stream, interval=10, clock=clock, announce=False, heartbeat=False)
    quick = reporter.start("reading small.txt", None, "comparisons")
    clock.now += 3
    quick.advance(5000)
    quick.finish()
    assert stream.getvalue() == ""
    slow = reporter.start("writing 3,000,000 decisions", 3e6, "decisions")
    clock.now += 12
    slow.advance(1.2e6)
    clock.now += 18
    slow.advance(1.8e6)
    slow.finish()
    failed = reporter.start("deciding 10 attempts", None, "attempts")
    clock.now += 11
    failed.finish(ok=False)  # it lasted the interval: its end is said even without a line before
    assert stream.getvalue().splitlines() == [
        "progress: writing 3,000,000 decisions: 1,200,000/3,000,000 decisions (40%), 100,000 decisions/s, "
        "elapsed 12s, ETA 18s",
        "progress: writing 3,000,000 decisions: done, 3,000,000 decisions in 30s (100,000 decisions/s)",
        "progress: deciding 10 attempts: stopped after 11s (0 attempts)",
    ]


def test_the_heartbeat_thread_writes_while_a_step_blocks():
    """The thread itself (a tiny interval; the test waits for a line, it does not time one)."""
    import threading

    seen = threading.Event()

    class Stream(io.StringIO):
        def write(self, text):
            if "so far" in text:
                seen.set()
            return super().write(text)

    stream = Stream()
    reporter = LogReporter(stream, interval=0.01)
    task = reporter.start("a step that counts only when it ends", None, "items")
    assert seen.wait(60), stream.getvalue()  # the main thread is blocked here, as in a long numpy call
    task.advance(7)
    task.finish()
    lines = stream.getvalue().splitlines()
    assert lines[0] == "progress: a step that counts only when it ends: started"
    assert re.fullmatch(r"progress: a step that counts only when it ends: done, 7 items in [\d.]+s \(.+ items/s\)",
                        lines[-1]), lines


def test_interval_from_env(monkeypatch):
    monkeypatch.delenv(INTERVAL_VARIABLE, raising=False)
    assert interval_from_env() == 10.0
    monkeypatch.setenv(INTERVAL_VARIABLE, "0")
    assert interval_from_env() == 0.0
    assert LogReporter(io.StringIO()).interval == 0.0
    monkeypatch.setenv(INTERVAL_VARIABLE, "2.5")
    assert interval_from_env() == 2.5
    for bad in ("soon", "-1", "nan"):
        monkeypatch.setenv(INTERVAL_VARIABLE, bad)
        assert interval_from_env() == 10.0


def test_format_duration():
    assert [format_duration(s) for s in (0.04, 9.94, 12.4, 96, 3725)] == ["0.0s", "9.9s", "12s", "1m36s", "1h02m"]


def test_make_reporter_picks_by_terminal():
    assert make_reporter(quiet=True) is None
    assert isinstance(make_reporter(stream=io.StringIO()), LogReporter)

    class Tty(io.StringIO):
        def isatty(self):
            return True

    assert isinstance(make_reporter(stream=Tty()), RichReporter)


def test_rich_reporter_shows_rate_and_eta_and_leaves_a_summary_line():
    from rich.console import Console

    out = io.StringIO()
    reporter = RichReporter(Console(file=out, force_terminal=True, width=160))
    with reporter:
        task = reporter.start("fitting 10 classes", 10, "classes")
        task.advance(4)
        live = reporter.progress.tasks[0]
        columns = [str(c.render(live)) for c in reporter.progress.columns[2:]]
        task.finish()
        assert not reporter.progress.tasks
    assert columns[0] == "4/10 classes"
    assert columns[1].endswith("classes/s") or "s/class" in columns[1]
    assert columns[3].startswith("ETA ")
    assert "fitting 10 classes: done, 10 classes" in out.getvalue()


# -- RunContext ------------------------------------------------------------------------------------

def test_stage_nests_and_advance_goes_to_the_innermost():
    rec = Recorder()
    ctx = RunContext(reporter=rec)
    with ctx.stage("outer", 3, "classes") as outer:
        ctx.advance(1)
        with ctx.stage("inner", 2):
            ctx.advance(2)
        outer.advance(2)
    assert [(s["description"], s["depth"], s["advances"], s["ok"]) for s in rec.stages] == [
        ("outer", 0, [1, 2], True), ("inner", 1, [2], True)]


def test_stage_marks_failure():
    rec = Recorder()
    ctx = RunContext(reporter=rec)
    with pytest.raises(KeyError):
        with ctx.stage("doomed", 5):
            raise KeyError("x")
    assert rec.stages[0]["ok"] is False and not ctx._stages


def test_track_reports_each_item_and_the_old_progress_function_still_works():
    rec = Recorder()
    assert list(RunContext(reporter=rec).track(iter("abc"), "letters", 3, unit="letters")) == ["a", "b", "c"]
    assert rec.stages == [{"description": "letters", "total": 3, "unit": "letters", "depth": 0, "advances": [1, 1, 1],
                           "ok": True}]
    calls = []

    def old_style(items, description, total=None):  # what third-party callers built before reporters
        calls.append((description, total))
        return iter(items)

    assert list(RunContext(progress=old_style).track([1, 2], "old", 2)) == [1, 2]
    assert calls == [("old", 2)]
    # stages and map reach an old-style progress function too: its iterator is pulled once per item done
    pulled = []

    def pulling(items, description, total=None):
        calls.append((description, total))
        for item in items:
            pulled.append(item)
            yield item

    ctx = RunContext(progress=pulling, executor=Serial())
    with ctx.stage("fit", 5, "classes"):
        assert ctx.map(_square, [1, 2], sizes=[2, 1]) == [1, 4]
        assert pulled == [0, 1, 2]
    assert calls[-1] == ("fit", 5) and pulled == [0, 1, 2, 3, 4]
    assert list(RunContext().track([1, 2], "none")) == [1, 2]


@pytest.mark.parametrize("executor", [None, Serial()], ids=["no-executor", "serial"])
def test_map_reports_every_item(executor):
    rec = Recorder()
    ctx = RunContext(reporter=rec, executor=executor)
    items = list(range(17))
    assert ctx.map(_square, items, description="squares", unit="numbers") == [x * x for x in items]
    (stage,) = rec.stages
    assert stage["total"] == 17 and stage["unit"] == "numbers" and stage["ok"]
    assert stage["advances"] == [1] * 17
    # without a description: the innermost stage, weighted by sizes
    rec.stages.clear()
    with ctx.stage("fit", 10, "classes"):
        assert ctx.map(_square, [1, 2, 3], sizes=[4, 4, 2]) == [1, 4, 9]
    assert rec.stages[0]["advances"] == [4, 4, 2]


def test_serial_executor_on_done_sees_every_index_once():
    seen = []
    assert Serial().map(_square, range(9), on_done=lambda idx: seen.extend(idx)) == [x * x for x in range(9)]
    assert seen == list(range(9))


class LegacyExecutor(Executor):
    """A third-party executor written before on_done existed."""

    def __init__(self):
        pass

    def _map(self, function, items):
        return [function(x) for x in items]


class LegacyMapExecutor:
    """Duck-typed: only ``map(function, items)``."""

    def map(self, function, items):
        return [function(x) for x in items]


@pytest.mark.parametrize("executor", [LegacyExecutor(), LegacyMapExecutor()], ids=["old-_map", "old-map"])
def test_executors_without_on_done_still_work_and_report_at_the_end(executor):
    rec = Recorder()
    ctx = RunContext(reporter=rec, executor=executor)
    assert ctx.map(_square, range(6), description="old") == [x * x for x in range(6)]
    assert sum(rec.stages[0]["advances"]) == 6
    assert RunContext(executor=executor).map(_square, [3]) == [9]


def test_processes_report_chunks_as_they_complete_and_keep_input_order():
    seen = []
    with Processes(workers=2) as ex:
        got = ex.map(_square, list(range(40)), on_done=lambda idx: seen.extend(idx))
    assert got == [x * x for x in range(40)]
    assert sorted(seen) == list(range(40))


def test_base_does_not_import_rich():
    code = "import sys, calibrate.contract.base, calibrate.contract.progress; assert 'rich' not in sys.modules, 'rich imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


# -- the command line ------------------------------------------------------------------------------

def _progress_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("progress: ")]


def test_cli_prints_progress_lines_when_stderr_is_not_a_terminal(tmp_path):
    proc = invoke_cli("run", str(ROOT / "examples" / "quickstart.yaml"), "--out", str(tmp_path / "out"),
                   env={"CALIBRATE_PROGRESS_INTERVAL": "0"})
    assert proc.returncode == 0, proc.stderr
    lines = _progress_lines(proc.stderr)
    for stage in ("generic-interp: fitting 200 classes", "auto: fitting 200 classes",
                  "fpr-evaluator: evaluating 3 estimator(s)"):
        assert any(line.startswith(f"progress: {stage}: started (") for line in lines), proc.stderr
        assert any(re.fullmatch(rf"progress: {re.escape(stage)}: done, \d+ \w+ in [\d.]+s \(.*\)", line)
                   for line in lines), proc.stderr
    assert "progress:" not in proc.stdout


def test_cli_quiet_prints_no_progress(tmp_path):
    proc = invoke_cli("run", str(ROOT / "examples" / "quickstart.yaml"), "--out", str(tmp_path / "out"), "--quiet",
                   env={"CALIBRATE_PROGRESS_INTERVAL": "0"})
    assert proc.returncode == 0, proc.stderr
    assert not _progress_lines(proc.stderr), proc.stderr


def test_slow_rates_name_one_item_in_proper_english():
    from calibrate.contract.progress import format_rate

    assert format_rate(1, 10, "galleries") == "10 s/gallery"
    assert format_rate(1, 10, "classes") == "10 s/class"
    assert format_rate(1, 10, "shards") == "10 s/shard"


def test_expected_counts_read_as_counts():
    from calibrate.formatting import format_count

    assert [format_count(x) for x in (199.0, 39800.0, 19.9, 3.96, 0.04, None)] == \
        ["199", "39,800", "19.9", "3.96", "0.04", "n/a"]


# -- the score-list commands (issue 32: fit, evaluate and accept printed nothing for up to 24 s) ----------------

@pytest.fixture(scope="module")
def score_list(tmp_path_factory):
    import numpy as np

    tmp = tmp_path_factory.mktemp("lists")
    rng = np.random.default_rng(3)
    with open(tmp / "scores.txt", "w") as fh:
        for i in range(120):
            real = f"c{i % 12}"
            for j in range(12):
                score = rng.beta(6, 2) if j == i % 12 else rng.beta(2, 6)
                fh.write(f"c{j} {real} p{i} {score:.6f}\n")
    return tmp


COMMANDS = {
    "fit": ("fit", "scores.txt", "--estimator", "class-interp", "--fpr", "0.05", "--out", "cal.json"),
    "evaluate": ("evaluate", "cal.json", "scores.txt"),
    "accept": ("accept", "cal.json", "scores.txt", "--fpr", "0.05", "--out", "decisions.csv"),
    "threshold": ("threshold", "cal.json", "--class", "c3", "--fpr", "0.05"),
}


def test_the_commands_report_their_stages_with_counts_and_rates(score_list):
    lines = {}
    for name, command in COMMANDS.items():
        done = invoke_cli(*command, cwd=score_list, env={"CALIBRATE_PROGRESS_INTERVAL": "0"})
        assert done.returncode == 0, done.stderr
        lines[name] = _progress_lines(done.stderr)
        assert "progress:" not in done.stdout
    counted = r"(\d[\d,]*) {unit} in [\d.]+s \([\d.,]+ (?:{unit}/s|s/\w+)\)"
    reading = "progress: reading scores.txt: done, " + counted.format(unit="comparisons")
    for name in ("fit", "evaluate", "accept"):
        assert any(re.fullmatch(reading, line) and "1,440" in line for line in lines[name]), lines[name]
    assert any(re.fullmatch(r"progress: class-interp: fitting 12 classes: done, " + counted.format(unit="classes"),
                            line) for line in lines["fit"]), lines["fit"]
    assert any(re.fullmatch(r"progress: class-interp: predicted FPR, simulated galleries: done, " + counted.format(
        unit="galleries"), line) for line in lines["fit"]), lines["fit"]
    assert any(re.fullmatch(r"progress: writing cal.json: done, " + counted.format(unit="classes"), line)
               for line in lines["fit"]), lines["fit"]
    assert any(re.fullmatch(r"progress: judging 1,440 attempts at 1 target\(s\): done, " + counted.format(
        unit="targets"), line) for line in lines["evaluate"]), lines["evaluate"]
    assert any(re.fullmatch(r"progress: writing 1,440 decisions: done, " + counted.format(unit="decisions"), line)
               for line in lines["accept"]), lines["accept"]
    assert any(re.fullmatch(r"progress: deciding 1,440 attempts: done, " + counted.format(unit="attempts"), line)
               for line in lines["accept"]), lines["accept"]
    for name in COMMANDS:
        assert any(re.fullmatch(r"progress: loading cal.json: done, " + counted.format(unit="classes"), line)
                   for line in lines[name]) == (name != "fit"), lines[name]


@pytest.mark.parametrize("name", list(COMMANDS))
def test_the_commands_are_quiet_with_q_and_when_done_within_the_interval(score_list, name):
    invoke_cli(*COMMANDS["fit"], cwd=score_list)
    for extra, env in ((("-q",), {"CALIBRATE_PROGRESS_INTERVAL": "0"}), ((), {"CALIBRATE_PROGRESS_INTERVAL": "600"})):
        done = invoke_cli(*COMMANDS[name], *extra, cwd=score_list, env=env)
        assert done.returncode == 0 and not _progress_lines(done.stderr), done.stderr


def test_a_failing_command_still_says_one_line(score_list):
    done = invoke_cli("accept", "cal.json", "missing.txt", "--fpr", "0.05", "--out", "d.csv", cwd=score_list)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
