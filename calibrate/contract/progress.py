"""Progress reporting: stages with a total, advanced as work completes, shown with rate and ETA.

A :class:`Reporter` starts stages (:meth:`Reporter.start` gives a :class:`Task`); a task is
advanced by the number of items (classes, pairs, images ...) just finished and finished once.
Components never talk to a reporter directly: they go through the run's
:class:`~calibrate.contract.base.RunContext` (``stage``, ``advance``, ``track``, ``map``).

Two reporters:

* :class:`RichReporter` - live bars on a terminal (count, rate, elapsed time, ETA); a finished
  stage leaves one line with its duration.
* :class:`LogReporter` - plain lines for logs (CI, cron, nohup): one when a stage starts, one
  every ``interval`` seconds while it runs (count, rate, ETA), one when it ends (its duration,
  count and rate). The interval defaults to 10 s; the environment variable
  ``CALIBRATE_PROGRESS_INTERVAL`` (seconds, ``0`` = every update) overrides it. The running
  stage's line comes at the interval whether or not its work advances it meanwhile (a
  heartbeat thread writes it; ``heartbeat=False``: only as the work advances), so a long step
  that reports nothing until it ends still shows how long it has run. With ``announce=False``
  (the score-list commands: ``fit``, ``evaluate``, ``accept``, ``threshold``) a stage is first
  shown when its first periodic line is due, and its end only then: a command that is done
  within the interval prints no progress at all.

This module imports nothing heavy; rich is imported only when a :class:`RichReporter` starts.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from typing import Callable, TextIO

#: seconds between a running stage's lines in plain (non-terminal) output
DEFAULT_INTERVAL = 10.0
INTERVAL_VARIABLE = "CALIBRATE_PROGRESS_INTERVAL"


def interval_from_env(default: float = DEFAULT_INTERVAL) -> float:
    """The plain-output interval: ``$CALIBRATE_PROGRESS_INTERVAL`` seconds when set to a number >= 0."""
    raw = os.environ.get(INTERVAL_VARIABLE, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        return default
    return value if value >= 0 and math.isfinite(value) else default


def format_duration(seconds: float) -> str:
    """0.4s, 12s, 1m36s, 2h05m."""
    if seconds < 10:
        return f"{seconds:.1f}s"
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


def _number(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() else f"{x:,.1f}"


def singular(unit: str) -> str:
    """``classes`` -> ``class``, ``galleries`` -> ``gallery``, ``items`` -> ``item``; other words as given."""
    if unit.endswith("ies") and len(unit) > 3:
        return unit[:-3] + "y"
    if unit.endswith(("sses", "shes", "ches", "xes")):
        return unit[:-2]
    return unit[:-1] if unit.endswith("s") and not unit.endswith("ss") and len(unit) > 1 else unit


def format_rate(done: float, elapsed: float, unit: str) -> str:
    """``12.3 classes/s`` (or ``2.5 s/class`` when slower than one per second)."""
    unit = unit or "items"
    if elapsed <= 0 or done <= 0:
        return f"- {unit}/s"
    rate = done / elapsed
    if rate >= 1:
        return f"{rate:.3g} {unit}/s" if rate < 1000 else f"{rate:,.0f} {unit}/s"
    single = singular(unit)
    return f"{1 / rate:.3g} s/{single}"


def eta_seconds(done: float, total: float | None, elapsed: float) -> float | None:
    """Remaining time at the mean rate so far (None while unknown)."""
    if total is None or done <= 0 or elapsed <= 0:
        return None
    return max(0.0, (total - done) * elapsed / done)


class Task:
    """One running stage. ``advance(n)`` after n more items are done; ``finish`` once at the end."""

    def advance(self, n: float = 1) -> None:
        pass

    def set_total(self, total: float | None) -> None:
        pass

    def finish(self, ok: bool = True) -> None:
        pass


#: a task that reports nothing (no reporter configured)
NULL_TASK = Task()


class Reporter:
    """Starts stages; also a context manager around the whole run (for live displays)."""

    def start(self, description: str, total: float | None = None, unit: str = "", depth: int = 0) -> Task:
        return NULL_TASK

    def __enter__(self) -> "Reporter":
        return self

    def __exit__(self, *exc) -> None:
        return None


class _LogTask(Task):
    def __init__(self, reporter: "LogReporter", description: str, total: float | None, unit: str):
        self.reporter, self.description, self.total, self.unit = reporter, description, total, unit or "items"
        self.done = 0.0
        self.started = self.last = reporter.clock()
        self.finished = False
        #: whether a line of this stage was written (without ``announce``, its end is written only then, or when it
        #: lasted the interval)
        self.shown = reporter.announce
        size = f" ({_number(total)} {self.unit})" if total is not None else ""
        if reporter.announce:
            reporter.emit(f"{description}: started{size}")

    def set_total(self, total: float | None) -> None:
        self.total = total

    def advance(self, n: float = 1) -> None:
        if self.finished:
            return
        self.done += n
        self.tick(self.reporter.clock())

    def tick(self, now: float) -> None:
        """The periodic line, when ``interval`` seconds have passed since the last (or the start) and the stage is not
        complete; called as the work advances and by the reporter's heartbeat."""
        with self.reporter.lock:
            if self.finished or now - self.last < self.reporter.interval or (
                    self.total is not None and self.done >= self.total):
                return
            self.last = now
            self.shown = True
            self.reporter.emit(self.line(now))

    def line(self, now: float) -> str:
        elapsed = now - self.started
        rate = format_rate(self.done, elapsed, self.unit)
        if not self.done:  # nothing counted yet (a step that counts only when it ends): how long it has run
            of = f"/{_number(self.total)}" if self.total is not None else ""
            return f"{self.description}: 0{of} {self.unit} so far, elapsed {format_duration(elapsed)}"
        if self.total is None:
            return f"{self.description}: {_number(self.done)} {self.unit}, {rate}, elapsed {format_duration(elapsed)}"
        pct = 100.0 * self.done / self.total if self.total else 100.0
        eta = eta_seconds(self.done, self.total, elapsed)
        return (f"{self.description}: {_number(self.done)}/{_number(self.total)} {self.unit} ({pct:.0f}%), {rate}, "
                f"elapsed {format_duration(elapsed)}, ETA {'?' if eta is None else format_duration(eta)}")

    def finish(self, ok: bool = True) -> None:
        with self.reporter.lock:
            if self.finished:
                return
            self.finished = True
            self.reporter.closed(self)
            elapsed = self.reporter.clock() - self.started
            if not self.shown and elapsed < self.reporter.interval:
                return  # done before its first line was due: nothing to say (announce=False)
            if ok:
                done = self.total if self.total is not None and self.done < self.total else self.done
                what = f"{_number(done)} {self.unit} " if done else ""
                rate = f" ({format_rate(done, elapsed, self.unit)})" if done else ""
                self.reporter.emit(f"{self.description}: done, {what}in {format_duration(elapsed)}{rate}")
            else:
                of = f"/{_number(self.total)}" if self.total is not None else ""
                self.reporter.emit(f"{self.description}: stopped after {format_duration(elapsed)} "
                                   f"({_number(self.done)}{of} {self.unit})")


class LogReporter(Reporter):
    """Plain progress lines (``progress: <stage>: ...``) for output that is not a terminal.

    :param stream: where lines go (default: ``sys.stderr`` at the time of writing).
    :param interval: seconds between two lines of a running stage; default from
        ``$CALIBRATE_PROGRESS_INTERVAL``, else 10.
    :param clock: monotonic seconds (tests pass a fake one).
    :param announce: write a line as each stage starts (else a stage is first shown when its first
        periodic line is due, and its end only if it was shown or lasted the interval).
    :param heartbeat: a thread writes the running stage's line at the interval even when its work
        does not advance it (only while a stage is open; not with interval 0, where every update
        writes one).
    """

    def __init__(self, stream: TextIO | None = None, interval: float | None = None,
                 clock: Callable[[], float] = time.monotonic, prefix: str = "progress: ", announce: bool = True,
                 heartbeat: bool = True):
        self.stream = stream
        self.interval = interval_from_env() if interval is None else float(interval)
        self.clock = clock
        self.prefix = prefix
        self.announce = announce
        self.heartbeat = heartbeat and self.interval > 0
        #: guards the open stages and the stream (advances may come from an executor's threads, beats from ours)
        self.lock = threading.RLock()
        self._open: list[_LogTask] = []
        self._wake = threading.Condition(self.lock)
        self._beating = False

    def emit(self, text: str) -> None:
        with self.lock:
            stream = self.stream or sys.stderr
            stream.write(f"{self.prefix}{text}\n")
            stream.flush()

    def start(self, description: str, total: float | None = None, unit: str = "", depth: int = 0) -> Task:
        with self.lock:
            task = _LogTask(self, description, total, unit)
            self._open.append(task)
            if self.heartbeat and not self._beating:
                self._beating = True
                threading.Thread(target=self._beat, name="calibrate-progress", daemon=True).start()
        return task

    def closed(self, task: _LogTask) -> None:
        """``task`` has finished: no more lines of it (the heartbeat stops with the last open stage)."""
        with self.lock:
            if task in self._open:
                self._open.remove(task)
            self._wake.notify_all()

    def beat(self) -> None:
        """One heartbeat: the innermost open stage's periodic line, if it is due (what the thread does at each wake;
        tests call it with a fake clock)."""
        with self.lock:
            if self._open:
                self._open[-1].tick(self.clock())

    def _beat(self) -> None:
        with self.lock:
            while self._open:
                self._wake.wait(min(self.interval, 1.0))
                self.beat()
            self._beating = False


class _RichTask(Task):
    def __init__(self, reporter: "RichReporter", description: str, total: float | None, unit: str, depth: int):
        self.reporter, self.description, self.unit = reporter, description, unit or "items"
        self.done, self.total = 0.0, total
        self.started = time.monotonic()
        self.finished = False
        self.id = reporter.progress.add_task(("  " * depth) + description, total=total, unit=self.unit)
        self.depth = depth

    def advance(self, n: float = 1) -> None:
        if not self.finished:
            self.done += n
            self.reporter.progress.advance(self.id, n)

    def set_total(self, total: float | None) -> None:
        self.total = total
        self.reporter.progress.update(self.id, total=total)

    def finish(self, ok: bool = True) -> None:
        if self.finished:
            return
        self.finished = True
        progress = self.reporter.progress
        progress.remove_task(self.id)
        elapsed = time.monotonic() - self.started
        done = self.total if ok and self.total is not None and self.done < self.total else self.done
        count = f"{_number(done)}{'' if ok or self.total is None else '/' + _number(self.total)} {self.unit}, " if done else ""
        rate = f", {format_rate(done, elapsed, self.unit)}" if done else ""
        state = "done" if ok else "stopped"
        progress.console.print(f"{'  ' * self.depth}{self.description}: {state}, {count}{format_duration(elapsed)}{rate}",
                               style="dim", highlight=False, markup=False)


class RichReporter(Reporter):
    """Live rich bars on stderr: description, bar, done/total, rate, elapsed, ETA."""

    def __init__(self, console=None):
        from rich.console import Console
        from rich.progress import BarColumn, Progress, ProgressColumn, TextColumn, TimeElapsedColumn
        from rich.table import Column
        from rich.text import Text

        class Count(ProgressColumn):
            def render(self, task) -> Text:
                total = "?" if task.total is None else _number(task.total)
                return Text(f"{_number(task.completed)}/{total} {task.fields.get('unit', '')}", style="progress.download")

        class Rate(ProgressColumn):
            def render(self, task) -> Text:
                return Text(format_rate(task.completed, task.elapsed or 0.0, task.fields.get("unit", "")),
                            style="progress.data.speed")

        class Eta(ProgressColumn):
            def render(self, task) -> Text:
                eta = eta_seconds(task.completed, task.total, task.elapsed or 0.0)
                return Text(f"ETA {'?' if eta is None else format_duration(eta)}", style="progress.remaining")

        def fixed() -> Column:  # numbers never wrap; a narrow terminal shortens the description instead
            return Column(no_wrap=True)

        self.progress = Progress(TextColumn("{task.description}", table_column=Column(ratio=1, overflow="ellipsis",
                                                                                       no_wrap=True, min_width=12)),
                                 BarColumn(bar_width=24), Count(fixed()), Rate(fixed()), TimeElapsedColumn(fixed()),
                                 Eta(fixed()), console=console or Console(stderr=True), transient=True, expand=True)

    def start(self, description: str, total: float | None = None, unit: str = "", depth: int = 0) -> Task:
        return _RichTask(self, description, total, unit, depth)

    def __enter__(self) -> "RichReporter":
        self.progress.start()
        return self

    def __exit__(self, *exc) -> None:
        self.progress.stop()


def make_reporter(quiet: bool = False, stream: TextIO | None = None, announce: bool = True) -> Reporter | None:
    """None when quiet; rich bars when ``stream`` (default stderr) is a terminal; plain lines otherwise
    (``announce``: :class:`LogReporter`'s)."""
    if quiet:
        return None
    stream = stream or sys.stderr
    isatty = getattr(stream, "isatty", None)
    if isatty is not None and isatty():
        return RichReporter()
    return LogReporter(stream, announce=announce)
