"""The CLI fuzz properties of tests/test_fuzz.py with many more (random, not derandomized) examples.

    .venv/bin/python benchmarks/fuzz_long.py --examples 2000 [--only score_matrix,npz_patterns] [--timeout 60]

Prints, per property, how many `validate`/`run` calls ended in exit 0 and exit 2, and every failure
(a traceback exit 1, a hang, more than one stderr line, a result file left after exit 2) with the
@reproduce_failure blob hypothesis prints for it. Exit status 1 when any property failed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from pathlib import Path

PROPERTIES = ("score_matrix", "npz_patterns", "synthetic", "image_sets")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=2000, help="examples per property (default 2000)")
    parser.add_argument("--only", default=",".join(PROPERTIES), help=f"comma-separated subset of {', '.join(PROPERTIES)}")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds one CLI call may take (default 60)")
    args = parser.parse_args()
    # the test module reads its profile when imported
    os.environ["CALIBRATE_FUZZ_PROFILE"] = "long"
    os.environ["CALIBRATE_FUZZ_EXAMPLES"] = str(args.examples)
    os.environ["CALIBRATE_FUZZ_TIMEOUT"] = str(args.timeout)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    import warnings

    warnings.simplefilter("ignore")
    import test_fuzz

    failed = []
    for name in args.only.split(","):
        prop = getattr(test_fuzz, f"test_fuzz_{name.strip()}")
        test_fuzz.OUTCOMES.clear()
        start = time.perf_counter()
        try:
            prop()
            status = "ok"
        except BaseException as exc:  # noqa: BLE001 - report every property's failure and go on
            if isinstance(exc, KeyboardInterrupt):
                raise
            status = "FAILED"
            failed.append(name)
            traceback.print_exception(exc, file=sys.stdout)
        counts = test_fuzz.OUTCOMES
        summary = ", ".join(f"{cmd} exit {code}: {n}" for (cmd, code), n in sorted(counts.items()))
        print(f"{name}: {status} in {time.perf_counter() - start:.1f} s; {summary}", flush=True)
    print(f"{len(failed)} of {len(args.only.split(','))} properties failed{': ' + ', '.join(failed) if failed else ''}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
