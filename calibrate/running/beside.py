"""Work run beside the pipeline, in a forked process, on a machine's other core.

A run's stages are mostly one core's work. Some of them depend on the fitted models but nothing after
them depends on their result until late: the predicted FPR interval (:mod:`calibrate.predicted.interval`) is read
only by the evaluators' predicted columns and the outputs, while the evaluation counts and the pictures
need only the thresholds. :func:`start` runs such a function in a child process forked from the run (the
child sees the run's arrays as they are, copied only if written: nothing is pickled on the way in) and
returns a :class:`Beside` whose :meth:`Beside.result` waits for the child and returns what the function
returned (pickled back through a pipe), or raises what it raised.

Forking is used only where it is the platform's safe default (Linux: ``os.fork`` with the ``fork`` start
method); elsewhere, or with ``CALIBRATE_BESIDE=0`` in the environment, or when :data:`ENABLED` is False,
:func:`available` says no and callers run the work in line, as before. The child writes nothing to the
terminal and must not touch the run's output folder; its result must be picklable.

Cost: one fork (a few milliseconds; the child's pages are the parent's until written) and the pickled
result; the child's own arrays add to the run's peak memory while both run. docs/performance.md
section 9 measures what it saves.
"""

from __future__ import annotations

import os
import pickle
import sys
import traceback
import warnings
from typing import Any, Callable

from calibrate.contract.progress import NULL_TASK, Reporter, Task

#: False turns every :func:`start` into "not available" (tests set it to compare both paths)
ENABLED = True


def available() -> bool:
    """Whether :func:`start` can fork here: Linux, ``os.fork`` present, not turned off (CALIBRATE_BESIDE=0)."""
    if not ENABLED or os.environ.get("CALIBRATE_BESIDE", "1").strip() in {"0", "false", "no", "off"}:
        return False
    return sys.platform.startswith("linux") and hasattr(os, "fork")


class BesideError(RuntimeError):
    """The child process ended without a result (killed, or out of memory)."""


class Beside:
    """A function running in a forked child; :meth:`result` waits for it (once; later calls return the same)."""

    def __init__(self, function: Callable[[], Any], name: str) -> None:
        import multiprocessing

        self.name = name
        context = multiprocessing.get_context("fork")
        self._reader, writer = context.Pipe(duplex=False)
        self._process = context.Process(target=_child, args=(function, writer), name=f"calibrate: {name}", daemon=True)
        with warnings.catch_warnings():
            # Python >= 3.12 warns on any fork of a process with threads (pyarrow's reader leaves a pool):
            # the child runs only numpy code of this package and calls into no thread pool's locks
            warnings.simplefilter("ignore", DeprecationWarning)
            self._process.start()
        writer.close()  # the child holds the only writing end: its exit is the reader's end of file
        self._done = False
        self._value: Any = None
        self._error: BaseException | None = None

    def result(self) -> Any:
        if not self._done:
            self._done = True
            try:
                kind, payload = pickle.loads(self._reader.recv_bytes())
            except EOFError:
                self._process.join()
                self._error = BesideError(f"{self.name}: the process computing it ended without a result (exit code "
                                          f"{self._process.exitcode}; killed, or out of memory?). Set CALIBRATE_BESIDE=0 "
                                          "in the environment to compute it in the run's own process")
            else:
                if kind == "ok":
                    self._value = payload
                else:
                    self._error = payload
            finally:
                self._reader.close()
                self._process.join()
        if self._error is not None:
            raise self._error
        return self._value

    @property
    def ready(self) -> bool:
        """Whether :meth:`result` would return (or raise) without waiting."""
        return self._done or self._reader.poll()

    def wait(self, seconds: float) -> bool:
        """:attr:`ready`, waiting up to ``seconds`` for it."""
        return self._done or self._reader.poll(seconds)

    @property
    def closed(self) -> bool:
        """Whether :meth:`result` or :meth:`close` has ended the child."""
        return self._done

    def close(self) -> None:
        """Stop the child if its result was never asked for (the run failed before it needed it)."""
        if not self._done:
            self._done = True
            self._error = BesideError(f"{self.name}: abandoned")
            self._process.kill()
            self._process.join()
            self._reader.close()


class SharedCount(Reporter):
    """The child's progress, counted in memory it shares with the run (made before the fork): items done and planned
    over the child's stages of one ``unit``, which :meth:`follow` shows in a stage of the run while it waits. Give it
    as the child's ``RunContext.reporter``."""

    def __init__(self, unit: str) -> None:
        import multiprocessing

        self.unit = unit
        self.counts = multiprocessing.get_context("fork").RawArray("d", 2)  # done, planned; written by the child only

    def start(self, description: str, total: float | None = None, unit: str = "", depth: int = 0) -> Task:
        return _Counting(self.counts, total) if unit == self.unit else NULL_TASK

    def follow(self, task: Task, job: Beside, every: float = 0.2) -> None:
        """Advance ``task`` (a stage of the run) by what the child does until ``job`` is ready; its total is what was
        left to do when the wait began, so that its rate and time left are the child's."""
        start = advanced = None
        while True:
            ready = job.wait(every)
            done, planned = self.counts[0], self.counts[1]
            if start is None:
                start, advanced = done, 0.0
            if planned:
                task.set_total(max(planned - start, 0.0))
            if done - start > advanced:
                task.advance(done - start - advanced)
                advanced = done - start
            if ready:
                return


class _Counting(Task):
    def __init__(self, counts, total: float | None) -> None:
        self.counts, self.total = counts, 0.0
        self.set_total(total)

    def set_total(self, total: float | None) -> None:
        self.counts[1] += (total or 0.0) - self.total
        self.total = total or 0.0

    def advance(self, n: float = 1) -> None:
        self.counts[0] += n


def start(function: Callable[[], Any], name: str) -> Beside:
    """``function()`` in a forked child (see the module docstring); call only when :func:`available`."""
    return Beside(function, name)


def _child(function: Callable[[], Any], writer) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # what the run should say, the function returns; the parent says it
        try:
            message = ("ok", function())
            data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        except BaseException as exc:  # noqa: BLE001 - handed to the parent, which raises it
            text = "".join(traceback.format_exception(exc))
            exc.add_note(f"(raised in the process beside the run:\n{text.rstrip()})")
            try:
                data = pickle.dumps(("error", exc), protocol=pickle.HIGHEST_PROTOCOL)
                pickle.loads(data)
            except Exception:  # an exception that does not survive pickling: its text instead
                data = pickle.dumps(("error", RuntimeError(f"in the process beside the run:\n{text}")))
    writer.send_bytes(data)
    writer.close()
