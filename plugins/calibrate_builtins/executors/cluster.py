"""Executor ``dask``: dask.distributed, a LocalCluster or an existing scheduler (optional extra
``pip install "calibrate-thresholds[dask]"``); chunks work exactly as the local executors do."""

from __future__ import annotations

import os
from typing import Callable

from calibrate.base import Executor
from calibrate.errors import CalibrateError, ParameterError

from .local import _apply_chunk, _chunks, _flatten, _spans, OnDone


class Dask(Executor):
    """dask.distributed: a LocalCluster by default, or an existing scheduler's address.

    :param address: scheduler address such as tcp://10.0.0.5:8786; default: start a LocalCluster here.
    :param workers: LocalCluster worker processes (one thread each); default: every core.
    :param memory_limit: LocalCluster memory limit per worker, e.g. "4GB"; default: dask's ("auto").
    """

    def __init__(self, *, address: str | None = None, workers: int | None = None, memory_limit: str = "auto"):
        if workers is not None and workers < 1:
            raise ParameterError(f"workers must be at least 1, got {workers}")
        if address is not None and workers is not None:
            raise ParameterError("give either `address:` (an existing scheduler) or `workers:` (a LocalCluster), not both")
        self.address, self.workers, self.memory_limit = address, workers, memory_limit
        self._client = None
        self._cluster = None

    def __enter__(self) -> "Dask":
        try:
            from distributed import Client, LocalCluster
        except ImportError:
            raise CalibrateError('executor dask needs dask.distributed: pip install "calibrate-thresholds[dask]"') from None
        if self.address:
            try:
                self._client = Client(self.address, timeout="20s")
            except (OSError, TimeoutError) as exc:
                raise CalibrateError(f"executor dask: cannot reach the scheduler at {self.address!r} ({exc}); "
                                     "check the address or omit it to start a local cluster") from None
        else:
            self._cluster = LocalCluster(n_workers=self.workers or os.cpu_count() or 1, threads_per_worker=1,
                                         processes=True, memory_limit=self.memory_limit, dashboard_address=None)
            self._client = Client(self._cluster)
        return self

    def __exit__(self, *exc) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None

    def n_workers(self) -> int:
        return max(1, len(self._client.scheduler_info().get("workers", {}))) if self._client else 1

    def _map(self, function: Callable, items: list, on_done: OnDone | None = None) -> list:
        if self._client is None:
            with self:
                return self._map(function, items, on_done)
        from distributed import as_completed as dask_completed

        chunks = _chunks(items, 4 * self.n_workers())
        spans = _spans(chunks)
        futures = self._client.map(_apply_chunk, [function] * len(chunks), chunks, pure=False)
        index = {future.key: k for k, future in enumerate(futures)}
        parts: list = [None] * len(chunks)
        try:
            # chunks are reported as they complete; results are placed back in input order
            for future in dask_completed(futures):
                k = index[future.key]
                parts[k] = future.result()
                if on_done is not None:
                    on_done(spans[k])
        except BaseException:
            self._client.cancel(futures)
            raise
        return _flatten(parts)
