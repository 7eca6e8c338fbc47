"""Work run beside the pipeline, in a forked process, on a machine's other core.

A run's stages are mostly one core's work. Some of them depend on the fitted models but nothing after
them depends on their result until late: the predicted FPR interval (:mod:`calibrate.predicted.interval`) is read
only by the evaluators' predicted columns and the outputs, while the evaluation counts and the pictures
need only the thresholds. :func:`start` runs such a function in a child process forked from the run (the
child sees the run's arrays as they are, copied only if written: nothing is pickled on the way in) and
returns a :class:`Beside` whose :meth:`Beside.result` waits for the child and returns what the function
returned (pickled back through a pipe), or raises what it raised. :func:`spread_map` shares the items of a
heavy map (``RunContext.map(spread=True)``: ncx2-grid's chunks of classes) with a forked child in the same way.

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
from typing import Any, Callable, Sequence

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


# -- a map shared with a forked child on the machine's other core ---------------------------------------------------

#: who took an item (a byte per item in shared memory): nobody yet, this process, the child
_FREE, _HERE, _CHILD = 0, 1, 2


def spread_map(function: Callable[[Any], Any], items: list, on_done: Callable[[Sequence[int]], None] | None = None) -> list:
    """``[function(item) for item in items]``, the items shared between this process and one child forked from it
    (the run's other core): this process takes them from the first up, the child from the last down, each marking
    an item as taken (a byte per item in shared memory) until they meet, so a core that other work slows down
    takes fewer. Results are the loop's, in its order: each item is computed whole, with the same code on the same
    data (the child sees the run's memory as it is; only results are pickled back). ``function`` must be pure (a
    result for its item, no effect the run relies on): where both processes reach the same item at once, both
    compute it. ``on_done(indices)`` is called in this process as items complete, once per item.

    Warnings the child's items raise are said here; an exception is raised here as the loop would raise it (the
    failing item with the lowest index). If the child dies (killed, out of memory), this process computes what
    it left. No lock is shared, so a child killed at any moment cannot stop this process. With one item, one
    core, or forking not :func:`available`, it is the loop itself."""
    n = len(items)
    if n < 2 or (os.cpu_count() or 1) < 2 or not available():
        out = []
        for i, item in enumerate(items):
            out.append(function(item))
            if on_done is not None:
                on_done((i,))
        return out
    import multiprocessing
    import queue
    import threading

    context = multiprocessing.get_context("fork")
    taken = context.RawArray("b", n)
    reader, writer = context.Pipe(duplex=False)
    process = context.Process(target=_spread_child, args=(function, items, taken, writer),
                              name="calibrate: map beside", daemon=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # see Beside: a fork of a process with threads
        process.start()
    writer.close()
    arrived: queue.Queue = queue.Queue()

    def receive() -> None:  # a thread, so that the child never waits on a full pipe while this process computes
        try:
            while True:
                arrived.put(pickle.loads(reader.recv_bytes()))
        except (EOFError, OSError):
            arrived.put(None)

    listener = threading.Thread(target=receive, name="calibrate: map beside results", daemon=True)
    listener.start()
    results: list[Any] = [None] * n
    have = [False] * n
    errors: dict[int, BaseException] = {}
    child_open = True

    def keep(i: int, value: Any) -> None:
        if not have[i]:
            have[i] = True
            results[i] = value
            if on_done is not None:
                on_done((i,))

    def collect(block: bool) -> None:
        nonlocal child_open
        while child_open:
            try:
                message = arrived.get(block=block)
            except queue.Empty:
                return
            if message is None:
                child_open = False
                return
            i, kind, payload, said = message
            for text, category in said:
                warnings.warn(text, category, stacklevel=3)
            if kind == "ok":
                keep(i, payload)
            else:
                errors[i] = payload

    try:
        for i in range(n):
            collect(block=False)
            if taken[i] == _CHILD:
                break  # met the child: the rest is its
            taken[i] = _HERE
            try:
                value = function(items[i])
            except Exception as exc:  # the loop's first error: the child's items all come after it
                errors[i] = exc
                break
            keep(i, value)
        if errors and all(have[:min(errors)]):  # every item before the first error is done
            raise errors[min(errors)]
        collect(block=True)  # until the child's end of file: it has sent everything it took
        # left by the child (it died, or stopped at an error): computed here, in order, up to the first error
        for i in range(n):
            if not have[i]:
                if i in errors:
                    raise errors[i]
                keep(i, function(items[i]))
    finally:
        if child_open:  # interrupted, or an error of this process ended the map: the child's work is not wanted
            process.kill()
        process.join()
        listener.join()
        reader.close()
    return results


def _spread_child(function: Callable[[Any], Any], items: list, taken, writer) -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the run's: it stops this process (spread_map's finally)
    for i in range(len(items) - 1, -1, -1):
        if taken[i] == _HERE:
            break  # met the parent
        taken[i] = _CHILD
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                message: tuple = (i, "ok", function(items[i]))
            except Exception as exc:  # handed to the parent, which raises it when no earlier item fails
                message = (i, "error", exc)
        said = [(str(w.message), w.category) for w in caught]
        try:
            data = pickle.dumps((*message, said), protocol=pickle.HIGHEST_PROTOCOL)
            pickle.loads(data)
        except Exception:  # a result or exception that does not survive pickling
            text = "".join(traceback.format_exception(message[2])) if message[1] == "error" else "an unpicklable result"
            data = pickle.dumps((i, "error", RuntimeError(f"in the process beside the run:\n{text}"), said))
            message = (i, "error")
        try:
            writer.send_bytes(data)
        except OSError:  # the parent is gone or stopped listening
            break
        if message[1] == "error":
            break
    writer.close()
