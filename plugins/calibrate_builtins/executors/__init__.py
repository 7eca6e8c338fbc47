"""Executors: where independent pieces of work run (this process, local processes, dask)."""

from __future__ import annotations

from calibrate.contract.hookspecs import RegisterExecutor, hookimpl


@hookimpl
def calibrate_register_executors(register: RegisterExecutor) -> None:
    from .cluster import Dask
    from .local import Processes, Serial

    register("serial", Serial)
    register("processes", Processes)
    register("dask", Dask)
