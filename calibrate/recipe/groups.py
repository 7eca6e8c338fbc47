"""Demographic groups of classes, read by the core once for any dataset (ISO/IEC 19795-10).

A groups file is a CSV (UTF-8, comma-separated) with a header naming a ``class`` and a ``group`` column (other
columns are ignored), one class per line::

    class,group
    alice,F
    bob,M

It names the group of enrolled classes and of the probes' real classes (a probe belongs to its real class's
group). A recipe names it under ``data: {groups: FILE}``; ``calibrate fit``, ``evaluate``, ``accept`` and
``enroll`` take ``--groups FILE``, ``calibrate.fit`` ``groups=``. :func:`read_groups` reads and checks it (a DataError naming the line and the fix);
:func:`check_against` checks it against the classes the data hold: none in common is an error (the wrong
file, or other names); classes of the file absent from the data are named in a note; enrolled classes
without a group are counted and reported as ``unlabelled``.
"""

from __future__ import annotations

import csv
import os
import io
from pathlib import Path

import numpy as np

from calibrate.errors import DataError
from calibrate.files.untrusted import label_problem, memory_budget, open_regular
from calibrate.contract.types import UNLABELLED, GroupLabels, group_problem

_FIX = "give a CSV file with a header line `class,group` and one class per line"


def read_groups(path: str | Path) -> GroupLabels:
    """The groups file at ``path`` (see the module), checked line by line."""
    path = Path(path)
    budget = memory_budget()
    try:
        with open_regular(path, "the groups file", _FIX) as fh:
            if os.fstat(fh.fileno()).st_size > budget:
                raise DataError(f"{path}: the groups file is larger than {budget:,} bytes; {_FIX}")
            text = fh.read().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: the groups file is not UTF-8 text (byte {exc.start}); save it as UTF-8") from None
    except OSError as exc:
        raise DataError(f"{path}: the groups file cannot be read ({exc.strerror or exc}); {_FIX}") from None
    if "\0" in text:
        raise DataError(f"{path}: the groups file holds a NUL byte (is it a binary file?); {_FIX}")
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader, None)
        if header is None:
            raise DataError(f"{path}: the groups file is empty; {_FIX}")
        names = [h.strip() for h in header]
        if "class" not in names or "group" not in names:
            shown = ",".join(names)[:80]
            raise DataError(f"{path}: line 1 ({shown!r}) does not name a `class` and a `group` column; {_FIX}")
        ci, gi = names.index("class"), names.index("group")
        seen: dict[str, tuple[str, int]] = {}
        for row in reader:
            line = reader.line_num
            if not row or all(not cell.strip() for cell in row):
                continue
            if len(row) <= max(ci, gi):
                raise DataError(f"{path}: line {line} has {len(row)} field(s) but the header names {len(names)}; {_FIX}")
            cls, group = row[ci].strip(), row[gi].strip()
            problem = label_problem(cls)
            if problem is not None:
                raise DataError(f"{path}: line {line}: class {cls[:40]!r} {problem}; {_FIX}")
            if not group:
                raise DataError(f"{path}: line {line}: class {cls[:60]!r} has no group; leave the line out (the class is "
                                f"then reported as `{UNLABELLED}`) or name its group")
            if group == UNLABELLED:
                raise DataError(f"{path}: line {line}: `{UNLABELLED}` is the name given to classes without a group; "
                                "leave such classes out of the file")
            problem = group_problem(group)
            if problem is not None:
                raise DataError(f"{path}: line {line}: group {group[:40]!r} {problem}")
            if cls in seen and seen[cls][0] != group:
                raise DataError(f"{path}: class {cls[:60]!r} is in group {seen[cls][0]!r} on line {seen[cls][1]} and in "
                                f"{group!r} on line {line}; give each class one group")
            seen.setdefault(cls, (group, line))
    except csv.Error as exc:
        raise DataError(f"{path}: line {reader.line_num} is not CSV ({exc}); {_FIX}") from None
    if not seen:
        raise DataError(f"{path}: the groups file names no class; {_FIX}")
    return GroupLabels(tuple(seen), tuple(g for g, _ in seen.values()), source=str(path))


def _examples(names, n: int = 3, total: int | None = None) -> str:
    shown = [repr(str(c)[:40]) for c in list(names)[:n]]
    return ", ".join(shown) + (" ..." if (len(names) if total is None else total) > n else "")


def check_against(labels: GroupLabels, enrolled, probes) -> list[str]:
    """Notes on ``labels`` against the data's classes (``enrolled``: the enrolled classes; ``probes``: the probes'
    real classes); a DataError when the file names none of them."""
    enrolled_set = set(np.asarray(enrolled).astype(str).tolist())
    known = enrolled_set | set(np.asarray(probes).astype(str).tolist())
    listed = set(labels.classes)
    missing = sorted(enrolled_set - listed)
    in_use = {g for c, g in zip(labels.classes, labels.groups) if c in enrolled_set}
    return groups_notes(labels, len(listed & known), sorted(listed - known), len(listed - known),
                        sorted(enrolled_set), len(enrolled_set), missing, len(missing), in_use)


def groups_notes(labels: GroupLabels, found: int, unknown_first: list, unknown: int, enrolled_first: list,
                 enrolled: int, missing_first: list, missing: int, in_use: set) -> list[str]:
    """:func:`check_against`'s notes from counts and the first names (sorted) of each kind: the file's classes found
    in the data, those not found, the enrolled classes and those without a group, and the groups the enrolled
    classes are in (a sharded run gathers these from its shards)."""
    listed = set(labels.classes)
    if not found:
        raise DataError(f"{labels.source}: none of its {len(listed):,} classes (e.g. {_examples(sorted(listed))}) is a "
                        f"class of the data (e.g. {_examples(enrolled_first, total=enrolled)}); the groups file must "
                        "name the classes as the data do")
    notes = []
    if unknown:
        notes.append(f"{labels.source}: {unknown:,} of its {len(listed):,} classes are not in the data (e.g. "
                     f"{_examples(unknown_first, total=unknown)}); they are ignored")
    if missing:
        notes.append(f"{labels.source}: {missing:,} of the {enrolled:,} enrolled classes have no group "
                     f"(e.g. {_examples(missing_first, total=missing)}); they are reported as `{UNLABELLED}` and left "
                     "out of the group differentials")
    if len(in_use) < 2:
        notes.append(f"{labels.source}: the enrolled classes are in {len(in_use)} group(s) "
                     f"({', '.join(sorted(in_use)) or 'none'}); differentials between groups need at least two")
    return notes
