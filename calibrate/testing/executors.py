"""Conformance checks for executors."""

from __future__ import annotations

from pathlib import Path

from calibrate.errors import DataError
from calibrate.testing.common import ComponentCase, _build, _params, _tmpdir


def _square(x: int) -> int:
    """Module-level (picklable) work item for executor checks."""
    return x * x


def _fail_on_seven(x: int) -> int:
    if x == 7:
        raise DataError("item 7 is bad")
    return x


def check_executor_map(case: ComponentCase, tmp_path: Path | None = None) -> None:
    """Inside ``with executor:``, ``map`` returns exactly the serial loop's results in input order, handles
    an empty list, lets a worker's exception through with its type, and keeps working afterwards."""
    with _tmpdir(tmp_path) as tmp:
        params = _params(case, tmp)
    items = list(range(23))
    ex = _build(case, params)
    with ex as entered:
        assert entered is ex, f"{case.id}: __enter__ must return the executor itself"
        got = ex.map(_square, items)
        assert list(got) == [_square(i) for i in items], f"{case.id}: map gave {list(got)[:6]}..., not the serial results in order"
        assert list(ex.map(_square, [])) == [], f"{case.id}: map over no items must return []"
        try:
            ex.map(_fail_on_seven, items)
        except DataError as exc:
            assert "item 7 is bad" in str(exc), f"{case.id}: the worker's error message was lost: {exc}"
        except Exception as exc:  # noqa: BLE001
            raise AssertionError(f"{case.id}: a DataError raised by the work came back as {type(exc).__name__}: {exc}; "
                                 "re-raise the original exception so bad input still exits with code 2") from exc
        else:
            raise AssertionError(f"{case.id}: an exception raised by the work was swallowed")
        assert list(ex.map(_square, items[:5])) == [0, 1, 4, 9, 16], f"{case.id}: map fails after a worker error"


CHECKS = (check_executor_map,)
