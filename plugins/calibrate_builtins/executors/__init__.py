"""Executors: where independent pieces of work run (this process, local processes, dask).

The hook below registers this room's components; calibrate_builtins/__init__.py gathers the six
hooks into the plugin that the ``calibrate`` entry point names. Modules are imported inside the
hook, so that nothing is imported before the plugins are listed.
"""

from __future__ import annotations

from calibrate.hookspecs import RegisterExecutor, hookimpl


@hookimpl
def calibrate_register_executors(register: RegisterExecutor) -> None:
    from .cluster import Dask
    from .local import Processes, Serial

    register("serial", Serial)
    register("processes", Processes)
    register("dask", Dask)
