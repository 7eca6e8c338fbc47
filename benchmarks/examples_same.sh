#!/usr/bin/env bash
# Every example recipe's outputs from this checkout and from another version's source tree, compared byte for byte
# (what a refactor must keep; issue 33):
#   git archive 580351c | tar -x -C /tmp/base
#   BASE=/tmp/base bash benchmarks/examples_same.sh [RECIPE ...]
# thresholds*.csv, calibration*.json, models.csv, det.csv and the pictures must be identical; results.json and
# report.md identical apart from wall-clock seconds; manifest.json differs by nature (hashes, dates, run id).
# paper-yale's ncx2-grid predicted-interval columns depend on a wall-clock budget: compare on a quiet machine.
# GAINED=1 (a change that adds report fields): results.json need only hold every field of the other tree's, equal,
# report.md is not compared, and files the other tree does not write are named.
set -u
BASE=${BASE:?set BASE to the source tree of the version to compare with}
ROOT=$(pwd)
OUT=$(mktemp -d)
export CALIBRATE_STATE_DIR=${CALIBRATE_STATE_DIR:-$OUT/state}
RECIPES=${*:-examples/*.yaml examples/bob-scores/*.yaml}
bad=0
for r in $RECIPES; do
  n=$(echo "$r" | tr / _)
  env -u PYTHONDONTWRITEBYTECODE .venv/bin/calibrate run -q "$r" --out "$OUT/this/$n" >/dev/null 2>&1 || { echo "$r: exit $? here"; bad=1; }
  (cd "$BASE" && PYTHONPATH="$BASE:$BASE/plugins" "$ROOT/.venv/bin/python" -P -c "from calibrate.cli import main; main()" \
    run -q "$ROOT/$r" --out "$OUT/base/$n" >/dev/null 2>&1) || { echo "$r: exit $? in $BASE"; bad=1; }
done
GAINED=${GAINED:-0} .venv/bin/python - "$OUT/base" "$OUT/this" <<'PY' || bad=1
import json, os, re, sys
from pathlib import Path
gained = os.environ.get("GAINED") == "1"
base, this = map(Path, sys.argv[1:3])
def text(t):  # wall-clock seconds, and the prediction budget derived from them
    t = re.sub(r"\d+(\.\d+)? s\b", "X s", t)
    t = re.sub(r"\| [^|\n]* \| [0-9.]+ \| \d+% \|", "|T|", t)
    return re.sub(r"budget_s: \d+", "budget_s: N", t)
def clean(o):
    if isinstance(o, dict):
        return {k: clean(v) for k, v in o.items() if k != "timings"}
    if isinstance(o, list):
        return [clean(v) for v in o]
    return text(o) if isinstance(o, str) else o
def within(old, new):  # every field of old in new, equal
    if isinstance(old, dict):
        return isinstance(new, dict) and all(k in new and within(v, new[k]) for k, v in old.items())
    if isinstance(old, list):
        return isinstance(new, list) and len(old) == len(new) and all(within(a, b) for a, b in zip(old, new))
    return old == new
differ = 0
for b in sorted(p for p in base.rglob("*") if p.is_file()):
    t = this / b.relative_to(base)
    if b.name == "manifest.json":
        continue
    if not t.exists():
        same = False
    elif b.name == "results.json" and gained:
        same = within(clean(json.loads(b.read_text())), clean(json.loads(t.read_text())))
    elif b.name == "results.json":
        same = clean(json.loads(b.read_text())) == clean(json.loads(t.read_text()))
    elif b.name == "report.md" and gained:
        continue
    elif b.name == "report.md":
        same = text(b.read_text()) == text(t.read_text())
    else:
        same = b.read_bytes() == t.read_bytes()
    if not same:
        differ += 1
        print(f"differs: {b.relative_to(base)}")
if gained:
    for t in sorted(p for p in this.rglob("*") if p.is_file()):
        if not (base / t.relative_to(this)).exists():
            print(f"new here: {t.relative_to(this)}")
print(f"{sum(1 for p in base.rglob('*') if p.is_file())} files compared, {differ} differ")
sys.exit(1 if differ else 0)
PY
rm -rf "$OUT"
exit $bad
