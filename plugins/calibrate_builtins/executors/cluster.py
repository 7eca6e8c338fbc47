"""Executor ``dask``: dask.distributed, a LocalCluster or an existing scheduler (optional extra
``pip install "calibrate-thresholds[dask]"``); chunks work exactly as the local executors do.

A LocalCluster's workers start without dask's ``MALLOC_TRIM_THRESHOLD_=65536`` (its default
``distributed.nanny.pre-spawn-environ``): that setting also turns off glibc's adaptive mmap threshold, so
every array over 128 KB is mapped fresh and its pages faulted in again, and a sharded run's workers spent
a third of their CPU time in the kernel (docs/performance.md, "Issue 32"). A value the user set (in dask's
configuration or the environment) is kept.
"""

from __future__ import annotations

import os
from typing import Callable

from calibrate.contract.base import Executor
from calibrate.errors import CalibrateError, ParameterError

from .local import _apply_chunk, _chunks, _flatten, _spans, OnDone


#: dask's own default for its workers' MALLOC_TRIM_THRESHOLD_ (distributed.yaml)
_DASK_TRIM_DEFAULT = "65536"


def _glibc_malloc():
    """A dask configuration context in which new workers keep glibc's default malloc tuning, unless the user chose a
    MALLOC_TRIM_THRESHOLD_ (dask's configuration other than its default, or this process's environment)."""
    import dask

    key = "distributed.nanny.pre-spawn-environ"
    if "MALLOC_TRIM_THRESHOLD_" in os.environ or str(dask.config.get(key, {}).get("MALLOC_TRIM_THRESHOLD_")) != \
            _DASK_TRIM_DEFAULT:
        return dask.config.set({})
    return dask.config.set({f"{key}.MALLOC_TRIM_THRESHOLD_": None})


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
            with _glibc_malloc():
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

        chunks = _chunks(items, self.n_workers())
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
