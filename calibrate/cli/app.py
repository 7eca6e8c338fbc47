"""The typer application and how the command line fails: exit 2 with one line for bad input and
for what the machine refuses (disk full, out of memory, permissions), exit 1 with the traceback for
anything else (a bug to report). Every command module registers on :data:`app`."""

from __future__ import annotations

import errno
import gc
import io
import os
import sys
import traceback
from contextlib import contextmanager
from typing import Iterator

import typer
import typer.core

from calibrate.errors import CalibrateError

def _usage_name(self) -> str:
    """A required argument as RECIPE in usage lines (POSIX style), not typer's {RECIPE}; optional ones [NAME]."""
    name = self.display_name_raw if self.required else f"[{self.display_name_raw}]"
    return name + ("..." if self.nargs != 1 else "")


if hasattr(getattr(typer.core, "TyperArgument", None), "_usage_display_name"):  # typer's private hook; else as is
    typer.core.TyperArgument._usage_display_name = _usage_name

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False, rich_markup_mode=None,
                  result_callback=lambda *a, **k: flush_notes(),
                  help="Verification thresholds at a low target false positive rate.")


#: --allow-extrapolation's help, the same on every command that takes it (fit, accept, threshold)
EXTRAPOLATION_HELP = "Answer a target below 1/N of the N training impostor distances (refused otherwise)."


#: -q/--quiet's help, the same on every command that reports progress
QUIET_HELP = ("No progress output (bars on a terminal, else progress lines on stderr every $CALIBRATE_PROGRESS_INTERVAL "
              "s, default 10).")


@contextmanager
def command_progress(quiet: bool, announce: bool = False) -> Iterator:
    """The progress of a command: a RunContext whose stages report (calibrate.contract.progress: live bars on a
    terminal; else plain lines on stderr every $CALIBRATE_PROGRESS_INTERVAL seconds, with counts and a rate); none
    with ``quiet``. ``announce`` (``run``): a line as each stage starts and ends; else (the score-list commands
    ``fit``, ``evaluate``, ``accept``, ``threshold``: reading, fitting, predicting, deciding, writing) a stage is
    first shown when its first line is due, so that a command done within the interval prints no progress."""
    from calibrate.contract.base import RunContext
    from calibrate.contract.progress import make_reporter

    reporter = make_reporter(quiet, sys.stderr, announce=announce)
    if reporter is None:
        yield RunContext()
        return
    with reporter:
        yield RunContext(reporter=reporter)


#: what to do when the machine, not the input, stops a command (errno -> the fix)
_ENVIRONMENT_FIXES = {
    errno.ENOSPC: "free disk space or choose another output folder",
    errno.EDQUOT: "free space within your disk quota or choose another output folder",
    errno.EFBIG: "choose an output folder on a file system that allows larger files",
    errno.EROFS: "choose an output folder on a writable file system",
    errno.EACCES: "check the file's permissions or choose another path",
    errno.EPERM: "check the file's permissions or choose another path",
    errno.EIO: "check the disk (an input/output error), then run again",
    errno.EMFILE: "raise the open-file limit (ulimit -n) or use fewer files",
    errno.ENFILE: "raise the system's open-file limit or use fewer files",
    errno.ENOMEM: "free memory, or split the data (a sharded run: `executor:` with `score-shards`)",
    # a path the user typed: too long for the file system, or symbolic links that point in a circle
    errno.ENAMETOOLONG: "give a shorter path (a file name is at most 255 bytes on most file systems)",
    errno.ELOOP: "the path's symbolic links point in a circle: fix or remove the link",
}


def _environment_message(exc: BaseException, source: object | None) -> str | None:
    """One line for an exception the machine raised (disk full, out of memory, too deep), or None."""
    where = f" while working on {source}" if source is not None else ""
    if isinstance(exc, MemoryError):
        return (f"out of memory{where}; the input is larger than this machine can hold: free memory, or split "
                "the data (a sharded run: `executor:` with `score-shards`)")
    if isinstance(exc, RecursionError):
        return f"the input is nested too deeply to read{where}; check that the file is what it should be"
    if isinstance(exc, OSError) and exc.errno in _ENVIRONMENT_FIXES:
        path = f" ({exc.filename})" if exc.filename else ""
        return f"{exc.strerror or exc}{path}{where}: {_ENVIRONMENT_FIXES[exc.errno]}"
    return None


def _fail(exc: BaseException, source: object | None = None) -> None:
    """Exit 2 with one line for bad input and for what the machine refused (disk full, out of memory,
    permissions); exit 1 with the traceback for anything else (a bug to report)."""
    PENDING.clear()  # a failing command says one thing: its error
    message = str(exc) if isinstance(exc, CalibrateError) else _environment_message(exc, source)
    if message is not None:
        typer.echo(f"error: {' '.join(message.split())}", err=True)
        raise typer.Exit(2)
    typer.echo("internal error (please report it with the traceback below):", err=True)
    traceback.print_exception(exc, file=sys.stderr)
    raise typer.Exit(1)


#: warnings met by the running command, printed as notes once it succeeds (a failing command prints its
#: one error line only)
PENDING: list[str] = []


def _warning_as_note(message, category, filename, lineno, file=None, line=None) -> None:
    """Warnings a command meets (a calibration from another version, an extrapolated target) become notes:
    one line each on stderr after the command's own output, as the run's notes are."""
    PENDING.append(" ".join(str(message).split()))


def install_warning_notes() -> None:
    """Called as each command starts (the app's callback)."""
    import warnings

    PENDING.clear()
    warnings.showwarning = _warning_as_note


def flush_notes(*_: object, **__: object) -> None:
    """After a command succeeded: its warnings, once each, as ``note:`` lines."""
    for message in dict.fromkeys(PENDING):
        typer.echo(f"note: {message}", err=True)
    PENDING.clear()


class _ClosedStdout(io.TextIOBase):
    """Stands for a standard output the process was started without (``>&-``): writing to it fails, so
    that a command's output is never lost silently (click's echo skips a missing stdout)."""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        raise OSError(errno.EBADF, "standard output is closed")


def _lost_output(exc: BaseException) -> None:
    """Exit 2 after a command's output could not be written (stdout full, closed, a broken pipe): one line
    on stderr when stderr itself can take it, never a traceback, never exit 0 (issue 19 audit: T13, S8)."""
    why = getattr(exc, "strerror", None) or str(exc)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:  # nothing more reaches the lost stream, nor does the interpreter's last flush complain about it
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        pass
    try:
        sys.stderr.write(f"error: the command's printed output could not be written ({why}): send standard output "
                         "to a file or device with room, or keep it open\n")
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        try:
            os.dup2(devnull, sys.stderr.fileno())
        except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
            pass
    sys.exit(2)


def run_app(application) -> None:
    """The console entry point: ``application`` run standalone, then standard output flushed while the
    exit code can still say that it failed."""
    if sys.stdout is None:
        sys.stdout = _ClosedStdout()
    code: object = 0
    try:
        application()
    except SystemExit as exc:
        code = exc.code
    except OSError as exc:  # printing a command's result, after its own error handling
        _lost_output(exc)
    try:
        sys.stdout.flush()
    except (OSError, ValueError) as exc:
        _lost_output(exc)
    # the command is over (outputs committed, streams flushed): the interpreter's last collection of every
    # object left (a whole run's arrays, lists and modules) took 0.4-0.5 s of a 7 s run; frozen objects are
    # left to the exit, which frees the memory at once (atexit handlers and open files are unaffected)
    gc.freeze()
    sys.exit(code)
