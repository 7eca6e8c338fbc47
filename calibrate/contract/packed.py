"""Long float arrays in a saved state, exact to the bit and a fraction of their JSON size (issue 32).

A saved model keeps sorted training values (a pooled sample's lowest, each class's lowest): as a JSON list
each float64 takes its shortest round-trip text, 17-20 characters. :func:`packed` writes an array of at least
:data:`PACK_FROM` values as ``{"encoding": "float64-delta-deflate", "count": n, "data": BASE64}`` instead:

1. the IEEE-754 bits of each value as an unsigned 64-bit key that orders as the floats do (sign bit set for
   positive values; every bit flipped for negative ones);
2. the differences of consecutive keys, modulo 2**64 (the first against 0): small numbers for sorted values,
   and exact for any order, as the running sum modulo 2**64 gives every key back;
3. per difference, the number of its significant bytes (0-8, one byte each, all n of them first), then the
   significant bytes of every difference in turn, least significant first: the zero high bytes of small
   differences are left out, and a difference that recurs (sorted scores written with a few decimals step by
   recurring gaps) is a recurring byte string;
4. deflated (zlib, level 6) and written as base64 text.

On the score lists of issue 32's benchmark (benchmarks/bench_calibration_size.py) that is about 1-4 bytes per
value (about 8 where every value is a different arbitrary float), against 10.7 characters for raw float64 bytes
in base64 and 17-20 for JSON; grouping the bytes by significance instead (a "shuffle") lost the recurring gaps
and came out up to three times larger. Reading it back is a decompression, a masked copy, a cumulative sum and a
view (milliseconds per million values); Python's standard library and numpy do all of it. The content digest
(calibrate.saved.json_format.DIGEST) covers the text like any other. :func:`unpacked` refuses a damaged one with a
DataError naming the field; the readers of a saved state (calibrate.contract.statecheck.numbers) take either form, a
JSON list (as every file before issue 32 holds) or a packed mapping.
"""

from __future__ import annotations

import base64
import binascii
import zlib
from collections.abc import Mapping
from typing import Any

import numpy as np

from calibrate.errors import DataError
from calibrate.files.untrusted import memory_budget

ENCODING = "float64-delta-deflate"
#: arrays shorter than this stay JSON lists (as small, and readable)
PACK_FROM = 1000
#: the most values one packed array may declare (8 GB of float64): a damaged count is refused before any work
MAX_COUNT = 10**9


def order_keys(values: np.ndarray) -> np.ndarray:
    """uint64 keys whose order is the order of the float64 ``values`` (-0.0 just below 0.0): step 1 above, and the
    keys a sharded run's selections bin and sort (calibrate.contract.sharded)."""
    bits = np.ascontiguousarray(values, dtype=np.float64).view(np.uint64)
    return np.where(bits >> np.uint64(63), ~bits, bits | np.uint64(1 << 63))


def _key_values(keys: np.ndarray) -> np.ndarray:
    """The float64 values of :func:`order_keys` (its inverse)."""
    top = keys >> np.uint64(63)
    return np.where(top, keys & ~np.uint64(1 << 63), ~keys).view(np.float64)


#: a difference below LIMITS[j] has at most j significant bytes
_LIMITS = np.array([1 << (8 * j) for j in range(1, 8)], dtype=np.uint64)


def packed(values: Any) -> list | dict[str, Any]:
    """A 1-D float array as a saved state holds it: a JSON list when shorter than :data:`PACK_FROM`, else the
    packed mapping (the module's docstring); :func:`unpacked` gives the very floats back."""
    v = np.asarray(values, dtype=np.float64).ravel()
    if v.size < PACK_FROM:
        return v.tolist()
    steps = np.diff(order_keys(v), prepend=np.uint64(0)).astype("<u8", copy=False)  # uint64: wraps modulo 2**64
    sizes = (np.searchsorted(_LIMITS, steps, side="right") + (steps > 0)).astype(np.uint8)
    significant = steps.view(np.uint8).reshape(-1, 8)[np.arange(8)[None, :] < sizes[:, None]]
    raw = zlib.compress(sizes.tobytes() + significant.tobytes(), 6)
    return {"encoding": ENCODING, "count": int(v.size), "data": base64.b64encode(raw).decode("ascii")}


def is_packed(value: Any) -> bool:
    return isinstance(value, Mapping) and "encoding" in value


#: values unpacked per step: the inflated bytes and the work arrays held at once stay a few MB whatever the count
_CHUNK = 1 << 20


def unpacked(value: Mapping[str, Any], where: str, at_most: int | None = None) -> np.ndarray:
    """The float64 array a packed mapping holds (every float as written), or a DataError naming the field
    (``where``, e.g. ``state.pooled``). Bounded before a byte is inflated: the count by ``at_most`` (what the state
    itself says the array holds, e.g. its ``n_pooled``) and by the machine's memory budget; then inflated a chunk
    at a time, never more than the count allows (a deflate bomb of a 1 MB text declaring 10**9 values is refused
    at once, and a count that lies is found with a few MB inflated)."""
    def bad(what: str) -> DataError:
        return DataError(f"{where} {what}")

    if value.get("encoding") != ENCODING:
        raise bad(f"names encoding {str(value.get('encoding'))[:40]!r}, not {ENCODING!r}")
    count, data = value.get("count"), value.get("data")
    if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= MAX_COUNT:
        raise bad(f"has count {str(count)[:40]!r}: must be the number of values, a whole number up to {MAX_COUNT:.0e}")
    if at_most is not None and count > at_most:
        raise bad(f"declares {count:,} values, but the state says it holds at most {at_most:,}")
    if 8 * count > memory_budget():
        raise bad(f"declares {count:,} values ({8 * count / 2**30:.1f} GiB), more than this machine's budget of "
                  f"{memory_budget() / 2**30:.1f} GiB for one input")
    if not isinstance(data, str):
        raise bad("has no data string")
    damaged = bad(f"data does not hold the {count} values its count declares")
    try:
        inflate = zlib.decompressobj()
        pending = [base64.b64decode(data.encode("ascii"), validate=True)]

        def take(n: int) -> bytes:
            """The next ``n`` inflated bytes (fewer only at the end of the stream)."""
            parts, got = [], 0
            while got < n and (pending[0] or not inflate.eof):
                part = inflate.decompress(pending[0], n - got)
                pending[0] = inflate.unconsumed_tail
                if not part and not pending[0]:
                    break
                parts.append(part)
                got += len(part)
            return b"".join(parts)

        sizes = np.frombuffer(take(count), dtype=np.uint8)
        if sizes.size != count or np.any(sizes > 8):
            raise damaged
        out = np.empty(count, dtype=np.uint64)
        carry = np.uint64(0)
        for start in range(0, count, _CHUNK):
            size = sizes[start:start + _CHUNK]
            body = take(int(size.sum(dtype=np.int64)))
            steps = np.zeros((size.size, 8), dtype=np.uint8)
            mask = np.arange(8)[None, :] < size[:, None]
            if len(body) != int(np.count_nonzero(mask)):
                raise damaged
            steps[mask] = np.frombuffer(body, dtype=np.uint8)
            keys = np.cumsum(steps.view("<u8").ravel(), dtype=np.uint64)
            keys += carry  # modulo 2**64, as written
            out[start:start + size.size] = keys
            carry = keys[-1]
        if take(1) or not inflate.eof or inflate.unused_data:
            raise damaged
    except DataError:
        raise
    except (binascii.Error, UnicodeEncodeError, ValueError, zlib.error) as exc:
        raise bad(f"data cannot be decoded ({type(exc).__name__})") from None
    return _key_values(out)
