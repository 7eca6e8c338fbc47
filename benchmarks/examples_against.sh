#!/usr/bin/env bash
# Wall seconds of each example recipe run by this checkout and by another version's source tree, interleaved:
#   git archive dbd669e | tar -x -C /tmp/base2
#   BASE=/tmp/base2 ROUNDS=3 bash benchmarks/examples_against.sh [RECIPE ...]
# Run from the repository root with its .venv; compiled modules are cached, as on a user's machine.
set -u
BASE=${BASE:?set BASE to the source tree of the version to compare with}
ROUNDS=${ROUNDS:-2}
ROOT=$(pwd)
OUT=$(mktemp -d)
RECIPES=${*:-examples/quickstart.yaml examples/auto.yaml examples/bssr1-face-c.yaml examples/bssr1-finger-left.yaml examples/bob-scores/*.yaml}
for r in $RECIPES; do
  for round in $(seq "$ROUNDS"); do
    rm -rf "$OUT/a" "$OUT/b"
    s=$(date +%s.%N); env -u PYTHONDONTWRITEBYTECODE .venv/bin/calibrate run -q "$r" --out "$OUT/a" >/dev/null 2>&1; a=$?; e=$(date +%s.%N)
    s2=$(date +%s.%N)
    (cd "$BASE" && env -u PYTHONDONTWRITEBYTECODE PYTHONPATH="$BASE:$BASE/plugins" "$ROOT/.venv/bin/python" -P -c \
      "from calibrate.cli import main; main()" run -q "$ROOT/$r" --out "$OUT/b" >/dev/null 2>&1); b=$?; e2=$(date +%s.%N)
    python3 - "$r" "$round" "$s" "$e" "$a" "$s2" "$e2" "$b" <<'PY'
import sys
r, k, s, e, a, s2, e2, b = sys.argv[1:]
this, other = float(e) - float(s), float(e2) - float(s2)
print(f"{r} round {k}: this {this:.2f} s (exit {a}), other {other:.2f} s (exit {b}), ratio {this / other:.2f}")
PY
  done
done
rm -rf "$OUT"
