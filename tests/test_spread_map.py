"""calibrate.running.beside.spread_map: a map whose items this process shares with a forked child (the machine's
other core) returns the loop's results in its order, raises the loop's error, says the child's warnings, survives
the child's death, and is the loop itself where forking is off; RunContext.map(spread=True) uses it only when the
run gives it."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
import warnings

import pytest

from calibrate.contract.base import RunContext
from calibrate.running import beside

forks = pytest.mark.skipif(not beside.available() or (os.cpu_count() or 1) < 2,
                           reason="a map is shared only where fork is the safe default (Linux), on 2 cores or more")


def _wait_for(path, seconds: float = 60.0) -> None:
    end = time.monotonic() + seconds
    while not os.path.exists(path):
        assert time.monotonic() < end, f"no {path.name} within a minute"
        time.sleep(0.01)


@forks
def test_both_processes_compute_items_and_the_results_are_the_loops_in_order(tmp_path):
    parent = os.getpid()

    def square(i):
        mine, other = (tmp_path / "parent", tmp_path / "child") if os.getpid() == parent else \
            (tmp_path / "child", tmp_path / "parent")
        if not mine.exists():  # each process holds its first item until the other has taken one: both work
            mine.touch()
            _wait_for(other)
        return i * i, os.getpid()

    done: list[int] = []
    out = beside.spread_map(square, list(range(12)), done.extend)
    assert [value for value, _ in out] == [i * i for i in range(12)]
    assert sorted(done) == list(range(12))  # every item reported once, as it completed
    pids = {pid for _, pid in out}
    assert parent in pids and len(pids) == 2
    assert not multiprocessing.active_children()


@forks
@pytest.mark.parametrize("bad", [(3, 7), (8,), (0, 9), (5, 6)])
def test_the_error_raised_is_the_loops_first(bad):
    def picky(i):
        if i in bad:
            raise ValueError(f"item {i} is unusable")
        return i

    for _ in range(3):  # whichever process takes which item
        with pytest.raises(ValueError, match=f"item {min(bad)} is unusable"):
            beside.spread_map(picky, list(range(10)))
    assert not multiprocessing.active_children()


@forks
def test_warnings_raised_in_the_child_are_said_here():
    def noisy(i):
        warnings.warn(f"item {i} is odd", UserWarning)
        return i

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert beside.spread_map(noisy, list(range(8))) == list(range(8))
    assert sorted(str(w.message) for w in caught) == sorted(f"item {i} is odd" for i in range(8))


@forks
def test_items_a_dead_child_left_are_computed_here():
    parent = os.getpid()

    def fragile(i):
        if os.getpid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)  # killed (say, out of memory) with an item taken
        return 2 * i

    assert beside.spread_map(fragile, list(range(6))) == [2 * i for i in range(6)]
    assert not multiprocessing.active_children()


def test_without_forking_it_is_the_loop_in_this_process(monkeypatch):
    monkeypatch.setattr(beside, "ENABLED", False)
    done: list[int] = []
    assert beside.spread_map(lambda i: (i, os.getpid()), [0, 1, 2], done.extend) == [(i, os.getpid()) for i in range(3)]
    assert done == [0, 1, 2]


def test_run_context_map_spreads_only_items_it_is_told_to_and_only_with_a_spreader():
    calls = []

    def spreader(function, items, on_done):
        calls.append(len(items))
        return [function(item) for item in items]

    assert RunContext().map(abs, [-1, -2], spread=True) == [1, 2]  # no spreader: the loop
    context = RunContext(spreader=spreader)
    assert context.map(abs, [-1, -2]) == [1, 2] and calls == []  # not told to
    assert context.map(abs, [-1, -2, -3], spread=True) == [1, 2, 3] and calls == [3]
