"""Executors ``serial`` and ``processes`` (and the chunking that ``dask`` shares, in cluster.py).

Each returns exactly what ``[function(item) for item in items]`` returns, in order; work
is sent in chunks (about four per worker, and at least :data:`MIN_CHUNKS` when there are as many
items) so that per-task overhead stays small against per-class fits that take milliseconds, while a
worker that the machine's other work slows down holds up the end of a map of heavy items (a sharded
run's pass over 1,000 shards) by a small share of it. ``map(..., on_done=f)`` reports each chunk (its item
indices) as it completes, so progress is real in parallel too. ``dask`` needs the optional extra
``pip install "calibrate-thresholds[dask]"`` (see cluster.py).
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Callable, Sequence

from calibrate.contract.base import Executor
from calibrate.errors import ParameterError


#: a map is cut into at least this many chunks when it has as many items (a chunk takes a few milliseconds to send)
MIN_CHUNKS = 64


def _chunks(items: list, workers: int) -> list[list]:
    """``items`` in consecutive chunks: about four per worker, at least MIN_CHUNKS, at most one per item."""
    n_chunks = max(1, min(max(4 * workers, MIN_CHUNKS), len(items)))
    size, extra = divmod(len(items), n_chunks)
    out, start = [], 0
    for k in range(n_chunks):
        stop = start + size + (1 if k < extra else 0)
        out.append(items[start:stop])
        start = stop
    return out


def _apply_chunk(function: Callable, chunk: list) -> list:
    return [function(item) for item in chunk]


def _flatten(parts: list[list]) -> list:
    return [x for part in parts for x in part]


def _spans(chunks: list[list]) -> list[range]:
    """The item indices of each chunk."""
    out, start = [], 0
    for chunk in chunks:
        out.append(range(start, start + len(chunk)))
        start += len(chunk)
    return out


OnDone = Callable[[Sequence[int]], None]


class Serial(Executor):
    """Everything in this process, one item after another (the default)."""

    def _map(self, function: Callable, items: list, on_done: OnDone | None = None) -> list:
        out = []
        for i, item in enumerate(items):
            out.append(function(item))
            if on_done is not None:
                on_done((i,))
        return out


class Processes(Executor):
    """A pool of local worker processes (all cores by default).

    :param workers: number of processes; default: every core of this machine.
    """

    def __init__(self, *, workers: int | None = None):
        if workers is not None and workers < 1:
            raise ParameterError(f"workers must be at least 1, got {workers}")
        self.workers = workers
        self._pool: ProcessPoolExecutor | None = None

    def _n(self) -> int:
        return self.workers or os.cpu_count() or 1

    def __enter__(self) -> "Processes":
        self._pool = ProcessPoolExecutor(self._n(), mp_context=multiprocessing.get_context("spawn"))
        return self

    def __exit__(self, *exc) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def _map(self, function: Callable, items: list, on_done: OnDone | None = None) -> list:
        if self._pool is None:
            with self:
                return self._map(function, items, on_done)
        chunks = _chunks(items, self._n())
        spans = _spans(chunks)
        futures = {self._pool.submit(_apply_chunk, function, chunk): k for k, chunk in enumerate(chunks)}
        parts: list = [None] * len(chunks)
        try:
            # chunks are reported as they complete; results are placed back in input order
            for future in as_completed(futures):
                k = futures[future]
                parts[k] = future.result()
                if on_done is not None:
                    on_done(spans[k])
        except BaseException:
            for future in futures:
                future.cancel()
            raise
        return _flatten(parts)
