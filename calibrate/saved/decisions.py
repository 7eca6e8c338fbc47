"""Decisions on integer class codes, for an embedding system that keeps codes rather than class names.

    codes = cal.codes(gallery_names)        # once: each name's position in cal.classes
    decide = cal.decider(0.001)             # once per target: a threshold per code, in score units
    accepted = decide(codes[claimed], scores)   # per batch of attempts: a gather and a compare

A :class:`Decider` holds the calibration's score thresholds at one target as one contiguous float64 array (a
copy of the one ``Calibration.accept`` reads, so its decisions are accept's, bit for bit) and compares with the
same rule (``score >= t`` for similarities, ``score <= t`` for distances). Attempts are decided a block of
``BLOCK`` at a time: each block's codes and scores are checked (codes in range, scores finite) while they are
in the cache, the thresholds gathered into a reused buffer (``np.take(..., out=)``) and compared into the
output (``out=``), so no temporary of the attempts' size is made.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from calibrate.errors import CalibrationError
from calibrate.saved.json_format import ACCEPT_IF

#: attempts decided per block: the block's thresholds (512 KB) stay in a core's L2 cache
BLOCK = 1 << 16


class Decider:
    """A calibration's decisions at one target on class codes: ``decide(codes, scores)`` accepts attempt i
    when ``scores[i] >= thresholds[codes[i]]`` (similarities; ``<=`` for distances, :attr:`accept_if`).

    ``classes[k]`` is the class of code k; :attr:`thresholds` (read-only) its threshold in score units."""

    def __init__(self, classes: tuple[str, ...], thresholds: np.ndarray, kind: str, target_fpr: float, label: str = ""):
        if kind not in ACCEPT_IF:
            raise CalibrationError(f"kind must be similarity or distance, got {kind!r}")
        t = np.array(thresholds, dtype=np.float64, order="C")  # a copy: nothing else changes it
        if t.shape != (len(classes),):
            raise CalibrationError(f"{t.size} thresholds for {len(classes)} classes; give one per class")
        t.flags.writeable = False
        self.classes, self.thresholds, self.kind = tuple(classes), t, kind
        self.target_fpr, self.label = float(target_fpr), label
        self._compare = np.greater_equal if kind == "similarity" else np.less_equal

    @property
    def accept_if(self) -> str:
        return ACCEPT_IF[self.kind]

    def __len__(self) -> int:
        return len(self.classes)

    def __repr__(self) -> str:
        return (f"Decider({self.label!r} at target FPR {self.target_fpr:g}, {len(self)} classes, "
                f"accept if {self.accept_if})")

    def __call__(self, codes: Any, scores: Any, out: np.ndarray | None = None) -> np.ndarray:
        """Accept (True) or reject each attempt: ``codes`` (integers in 0..len-1, one per attempt: positions in
        :attr:`classes`, as ``Calibration.codes`` gives them) and ``scores`` (real numbers in score units, one per
        attempt), both 1-D and of one length. ``out``: a boolean array of that length to write the decisions into
        (else a new one). A code out of range, a score that is not finite, or arrays that do not fit are a
        CalibrationError naming the first offender; the check reads each block's minimum and maximum code and
        the sum of its scores while the block is in the cache (about a quarter of the decisions' time)."""
        c, s = _codes(codes), _scores(scores)
        if c.ndim != 1 or s.ndim != 1:
            raise CalibrationError(f"codes and scores must be one-dimensional, got shapes {c.shape} and {s.shape}")
        if c.size != s.size:
            raise CalibrationError(f"{c.size} codes but {s.size} scores; give one class code per score")
        if out is None:
            out = np.empty(s.size, dtype=bool)
        elif not (isinstance(out, np.ndarray) and out.dtype == bool and out.shape == s.shape):
            raise CalibrationError(f"out must be a boolean array of shape {s.shape}, got "
                                   + (f"{out.dtype} of shape {out.shape}" if isinstance(out, np.ndarray)
                                      else type(out).__name__))
        t, n = self.thresholds, len(self)
        buf = np.empty(min(BLOCK, s.size), dtype=np.float64)
        cast = not np.can_cast(c.dtype, np.intp)  # uint64: taken as intp once its range is checked
        with np.errstate(over="ignore", invalid="ignore"):  # the sum of large finite scores may overflow
            for lo in range(0, s.size, BLOCK):
                hi = min(lo + BLOCK, s.size)
                block, x = c[lo:hi], s[lo:hi]
                if int(block.min()) < 0 or int(block.max()) >= n:
                    i = lo + int(np.flatnonzero((block < 0) | (block >= n))[0])
                    raise CalibrationError(f"class code number {i + 1} is {int(c[i])}, not a code of this "
                                           f"calibration's {n} classes (0..{n - 1}); get the codes from "
                                           "Calibration.codes(names)")
                if not np.isfinite(np.add.reduce(x)):  # NaN or inf, or finite scores that overflow
                    bad = np.flatnonzero(~np.isfinite(x))
                    if bad.size:
                        i = lo + int(bad[0])
                        raise CalibrationError(f"score number {i + 1} is {float(s[i])}; every score must be a finite "
                                               "number")
                b = buf[:hi - lo]
                np.take(t, block.astype(np.intp) if cast else block, out=b)
                self._compare(x, b, out=out[lo:hi])
        return out


def _codes(codes: Any) -> np.ndarray:
    c = np.asarray(codes)
    if c.dtype.kind not in "iu":
        raise CalibrationError(f"class codes must be integers (positions in the calibration's classes), got "
                               f"{c.dtype}; get them with Calibration.codes(names)")
    return c


def _scores(scores: Any) -> np.ndarray:
    s = np.asarray(scores)
    if s.dtype.kind not in "iuf":
        raise CalibrationError(f"scores must be real numbers (one per attempt, in score units), got {s.dtype}")
    return s if s.dtype == np.float64 else s.astype(np.float64)
