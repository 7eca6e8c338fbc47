#!/bin/bash
# The independent audit of 2026-11-25 (issue 19): its 62 reproductions, rerunnable. It was written
# against 286b0f4 by an auditor who had not seen benchmarks/audit.py; every case there failed then
# (traceback, hang, damage, memory or silent acceptance) and is fixed on the main that followed.
# Each case runs in a fresh folder under $ROOT (default: a new temporary folder), with a 60 s timeout
# and a 12 GB address-space cap; a line per case: id, exit code, peak memory, last line of stderr.
# Memory cases (M*) allocate several GB on the old code: run them alone.
# Usage, from the repository root:  bash benchmarks/audit_repro.sh            (all)
#                                   bash benchmarks/audit_repro.sh T1 D4 ...  (some)
# Read each case's line against the finding it reproduces (docs/architecture.md's trust rules):
# exit 2 with one line naming the file, or for damage cases (D*, S9*) the victim file unchanged.
HERE=$(cd "$(dirname "$0")/.." && pwd)
export CAL=${CAL:-$HERE/.venv/bin/calibrate} PY=${PY:-$HERE/.venv/bin/python}
ROOT=${ROOT:-$(mktemp -d)}; mkdir -p $ROOT; echo "cases in $ROOT" >&2
scores() {  # a small bob 4-column score list: 30 classes x 12 probes, similarity scores
  $PY -c "
import numpy as np; r=np.random.default_rng(1)
with open('$1','w') as f:
  for p in range(30):
    for k in range(12):
      for c in range(30): f.write(f's{c:02d} s{p:02d} s{p:02d}/p{k} {(r.normal(.8,.05) if c==p else r.normal(.3,.1)):.4f}\n')"; }
cal() { scores dev.txt; $CAL fit dev.txt --fpr 0.05 --fpr 0.01 --out cal.json 2>/dev/null; }
shardrun() {  # a sharded run's folder R (head + parts)
  scores dev.txt; mkdir -p sh; awk '{ if (substr($1,2)+0 < 15) print > "sh/a.txt"; else print > "sh/b.txt" }' dev.txt
  printf 'version: 1\ndata: {plugin: score-shards, path: sh, kind: similarity}\ntransform: {plugin: similarity-to-distance, upper: 1.0}\nestimators: [{plugin: auto}]\nevaluation: {targets: [0.05], prediction: false}\n' > s.yaml
  $CAL run s.yaml --out R -q 2>/dev/null; }
syn() { printf 'version: 1\ndata: {plugin: synthetic-impostors, classes: 20, train: 100, test: 50}\nestimators: [{plugin: class-interp}]\nevaluation: {targets: [0.05], prediction: false}\n' > r.yaml; }
edit() { $PY -c "import json,sys; p=sys.argv[1]; d=json.load(open(p)); exec(sys.argv[2]); open(p,'w').write(json.dumps(d))" "$@"; }
go() { local id=$1; shift; local d=$ROOT/$id; rm -rf $d; mkdir -p $d; ( cd $d; eval "$SETUP" >/dev/null 2>&1
  ( ulimit -v 12000000; /usr/bin/time -f '%M' -o .rss timeout -s INT 60 bash -c "$*" ) > .out 2> .err; rc=$?
  printf '%-4s rc=%-3s maxrss=%sKB | %s\n' "$id" "$rc" "$(tail -1 .rss)" "$(grep -v '^\s*$' .err | grep -v '^[0-9]*$' | tail -1 | cut -c1-150)" ); }
want() { [ $# -eq 0 ] || [[ " $WANT " == *" $1 "* ]]; }
WANT="$*"
run() { local id=$1; shift; if [ -z "$WANT" ] || [[ " $WANT " == *" $id "* ]]; then go "$id" "$@"; fi; }

# ---------------- hangs ----------------
SETUP='syn; mkdir out; mkfifo out/manifest.json';  run H1 '$CAL run r.yaml --out out -q'
SETUP='syn; mkdir out; mkfifo out/results.json';   run H2 '$CAL run r.yaml --out out -q'
# ---------------- memory ----------------
SETUP='syn; mkdir out; ln -s /dev/zero out/manifest.json'; run M1 '$CAL run r.yaml --out out -q'
SETUP='syn; mkdir out; ln -s /dev/zero out/results.json';  run M1b '$CAL run r.yaml --out out -q'
SETUP='$PY -c "
from PIL import Image; import os
for c in range(2):
  for s in range(2): os.makedirs(f\"imgs/c{c}/s{s}\"); Image.new(\"1\",(9400,9400)).save(f\"imgs/c{c}/s{s}/i.png\")"
printf "version: 1\ndata: {plugin: image-sets, path: imgs}\ndistance: {plugin: euclidean}\nestimators: [{plugin: generic-interp}]\nevaluation: {targets: [0.05], prediction: false}\n" > r.yaml'
run M2 'du -sh imgs >&2; $CAL run r.yaml --out out -q'
SETUP='$PY -c "
import numpy as np; np.savez_compressed(\"p.npz\", X=np.zeros((2,100_000_000)), labels=np.array([\"a\",\"b\"]), sets=np.array([\"x\",\"x\"]))"
printf "version: 1\ndata: {plugin: npz-patterns, path: p.npz}\ndistance: {plugin: euclidean}\nestimators: [{plugin: generic-interp}]\nevaluation: {targets: [0.05], prediction: false}\n" > r.yaml'
run M3 'ls -la p.npz >&2; $CAL run r.yaml --out out -q'
SETUP='$PY -c "
from PIL import Image; import os, numpy as np
for c in range(4):
  for s in range(2): os.makedirs(f\"imgs/c{c}/s{s}\"); Image.fromarray((np.random.rand(8,8)*255).astype(\"uint8\")).save(f\"imgs/c{c}/s{s}/i.png\")"
printf "version: 1\ndata: {plugin: image-sets, path: imgs, resize: [9000, 9000]}\ndistance: {plugin: euclidean}\nestimators: [{plugin: generic-interp}]\nevaluation: {targets: [0.05], prediction: false}\n" > r.yaml'
run M4 '$CAL run r.yaml --out out -q'
# ---------------- tracebacks (exit 1) ----------------
SETUP='scores dev.txt'; run T1 '$CAL fit dev.txt --seed -5 --fpr 0.05 --out c.json'
SETUP='scores dev.txt'; run T2 '$CAL fit dev.txt --format xml --out c.json'
SETUP='scores dev.txt; cal'; run T2b '$CAL accept cal.json dev.txt --fpr 0.05 --format xml --out d.csv'
SETUP='printf "claimed_id,real_id,score\na,b,0.5\nb,a,0.4\n" > s.csv'; run T3 '$CAL fit s.csv --claimed-column score --score-column score --out c.json'
SETUP=''; run T4 '$CAL validate $(printf "a%.0s" $(seq 300)).yaml'
SETUP='cal; edit cal.json "d[\"kind\"]=[\"similarity\"]"'; run T5 '$CAL threshold cal.json --class s03 --fpr 0.05'
SETUP='cal; edit cal.json "d[\"training\"]={\"impostors\":10**400}"'; run T6 '$CAL threshold cal.json --class s03 --fpr 0.05'
SETUP='cal; edit cal.json "d[\"versions\"]=[1]"'; run T7 '$CAL threshold cal.json --class s03 --fpr 0.05'
SETUP='echo "{\"format\":\"calibrate-partitioned\"}" > h.json'; run T8 '$CAL threshold h.json --class a --fpr 0.05'
SETUP='echo "{\"format\":\"calibrate-partitioned\",\"estimators\":\"a\"}" > h.json'; run T8b '$CAL threshold h.json --class a --fpr 0.05'
SETUP='shardrun; edit R/calibration.json "d[\"estimators\"][\"auto\"][\"params\"]={\"bogus\":1}"'; run T9 '$CAL threshold R --class s03 --fpr 0.05'
SETUP='shardrun; edit R/calibration.json "d[\"versions\"]=\"x\""'; run T10 '$CAL threshold R --class s03 --fpr 0.05'
SETUP='shardrun; edit R/calibration-part00000.json "del d[\"transform\"]"'; run T11 '$CAL threshold R --class s03 --fpr 0.05'
SETUP='$PY -c "
import numpy as np; r=np.random.default_rng(0); n=240
np.savez(\"p.npz\", X=np.zeros(n, dtype=[(\"a\",\"f8\"),(\"b\",\"f8\")]), labels=np.repeat([f\"c{i}\" for i in range(20)],12), sets=np.tile(np.repeat([\"a\",\"b\",\"c\"],4),20))"
printf "version: 1\ndata: {plugin: npz-patterns, path: p.npz}\ndistance: {plugin: euclidean}\nestimators: [{plugin: generic-interp}]\nevaluation: {targets: [0.05], prediction: false}\n" > r.yaml'
run T12 '$CAL run r.yaml --out out -q'
# stdout/stderr on a full device, closed stdout
SETUP='syn'; run T13 '$CAL validate r.yaml > /dev/full'
SETUP='syn'; run T13b '$CAL run r.yaml --out out -q > /dev/full'
SETUP='syn'; run T13c '$CAL run r.yaml --out out -q 2> /dev/full; echo "rc=$?" > rc.txt; cat rc.txt >&2'
SETUP='cal'; run T13d '$CAL threshold cal.json --class s03 --fpr 0.05 > /dev/full'
SETUP='cal'; run T14 '$CAL accept cal.json dev.txt --fpr 0.05 --out - >&-'
SETUP='scores dev.txt'; run T14b '$CAL fit dev.txt --fpr 0.05 --no-predict --out - >&-'
# ---------------- damage ----------------
# D1: a results.json with three keys makes every output-named user file "calibrate's" (legacy rule, by name only)
SETUP='syn; mkdir out victim; echo "victim" > victim/v.txt; echo "{\"estimators\":1,\"recipe\":1,\"versions\":1}" > out/results.json; echo "my notes" > out/report.md; echo "my table" > out/thresholds.csv'
run D1 'cat out/report.md out/thresholds.csv >&2; $CAL run r.yaml --out out -q; echo "after: $(head -c 40 out/report.md | head -1) / $(head -1 out/thresholds.csv)" >&2'
SETUP='syn; mkdir out victim; echo "victim" > victim/v.txt; echo "{\"estimators\":1,\"recipe\":1,\"versions\":1}" > out/results.json; ln -s ../victim/v.txt out/thresholds.csv'
run D1b '$CAL run r.yaml --out out -q; ls -l out/thresholds.csv >&2'
# D2: a manifest that cannot be parsed (here re-encoded UTF-16) drops the hash protection: a report.md the user edited is overwritten
SETUP='syn; $CAL run r.yaml --out out -q; echo "MY EDIT" >> out/report.md; $PY -c "t=open(\"out/manifest.json\").read(); open(\"out/manifest.json\",\"wb\").write(t.encode(\"utf-16\"))"'
run D2 '$CAL run r.yaml --out out -q; grep -c "MY EDIT" out/report.md >&2 || echo "user edit lost" >&2'
# D3: a planted journal may delete any user file in --out whose SHA-256 it states (no manifest ever listed it)
SETUP='syn; mkdir -p out/.calibrate-staging-x; echo "my notes" > out/notes.txt; H=$(sha256sum out/notes.txt | cut -c1-64)
echo "{\"files\":[],\"replaces\":{\"notes.txt\":{\"bytes\":9,\"sha256\":\"$H\"}},\"manifest\":{\"format\":\"calibrate-output\",\"version\":1,\"files\":{}}}" > out/.calibrate-staging-x/.journal.json'
run D3 '$CAL run r.yaml --out out -q; ls out/notes.txt >&2'
# T15: journal whose files list holds a list -> TypeError (outputs._checked_journal: set(files))
SETUP='syn; mkdir -p out/.calibrate-staging-x; echo "{\"files\":[[\"a\"]],\"replaces\":{},\"manifest\":{\"format\":\"calibrate-output\",\"version\":1,\"files\":{}}}" > out/.calibrate-staging-x/.journal.json'
run T15 '$CAL run r.yaml --out out -q'
# ---------------- silent acceptance (exit 0, meaningless or self-contradictory result) ----------------
# S1: fit/run write a calibration their own loader refuses (NUL in a label; labels > 1024 chars from an .npz)
SETUP='scores dev.txt; sed -i "s/^s01 /s0\x001 /" dev.txt'; run S1 '$CAL fit dev.txt --fpr 0.05 --out c.json && $CAL threshold c.json --class s00 --fpr 0.05'
SETUP='$PY -c "
import numpy as np; r=np.random.default_rng(0)
np.savez(\"p.npz\", X=r.normal(size=(240,8))+np.repeat(r.normal(size=(20,8))*2,12,0), labels=np.repeat([f\"c{i}\"*600 for i in range(20)],12), sets=np.tile(np.repeat([\"a\",\"b\",\"c\"],4),20))"
printf "version: 1\ndata: {plugin: npz-patterns, path: p.npz}\ndistance: {plugin: euclidean}\nestimators: [{plugin: generic-interp}]\nevaluation: {targets: [0.05], prediction: false}\n" > r.yaml'
run S1b '$CAL run r.yaml --out out -q && $CAL threshold out --class c0 --fpr 0.05'
# S2: loose number grammar on the command line (--missing 1_0 is read as 10.0; --fpr 0_05 likewise)
SETUP='scores dev.txt'; run S2 '$CAL fit dev.txt --fpr 0.05 --missing 1_0 --no-predict --out c.json && echo "exit 0: --missing 1_0 accepted" >&2'
SETUP='cal'; run S2b '$CAL threshold cal.json --class s03 --fpr 0_05 && echo "exit 0: --fpr 0_05 accepted" >&2'
# S3: damaged calibration states load and answer (offset 1e30 / loc -1e30 -> threshold pinned at the transform bound; tail beta 0, xi 1e10, p_u 2; strings as floats; invalid transform params)
SETUP='cal; edit cal.json "d[\"estimators\"][\"auto\"][\"state\"][\"offset\"]=1e30"'; run S3 '$CAL evaluate cal.json dev.txt | tail -2 >&2'
SETUP='cal; edit cal.json "d[\"estimators\"][\"auto\"][\"state\"][\"tail\"][\"xi\"]=1e10"'; run S3b '$CAL threshold cal.json --class s03 --fpr 0.0005'
SETUP='cal; edit cal.json "d[\"estimators\"][\"auto\"][\"state\"][\"tail\"][\"beta\"]=0"'; run S3c '$CAL threshold cal.json --class s03 --fpr 0.0005'
SETUP='cal; edit cal.json "d[\"estimators\"][\"auto\"][\"state\"][\"loc\"]=[str(x) for x in d[\"estimators\"][\"auto\"][\"state\"][\"loc\"]]"'; run S3d '$CAL threshold cal.json --class s03 --fpr 0.05'
SETUP='cal; edit cal.json "d[\"transform\"][\"params\"]={\"method\":\"cube\"}"'; run S3e '$CAL threshold cal.json --class s03 --fpr 0.05'
SETUP='cal; edit cal.json "d[\"transform\"][\"state\"][\"upper\"]=\"1\""'; run S3f '$CAL threshold cal.json --class s03 --fpr 0.05'
# S4: partitioned head / parts: unknown head version accepted; a part whose kind contradicts the head
SETUP='shardrun; edit R/calibration.json "d[\"version\"]=99"'; run S4 '$CAL threshold R --class s03 --fpr 0.05'
SETUP='shardrun; edit R/calibration-part00000.json "d[\"kind\"]=\"distance\""'; run S4b '$CAL threshold R --class s03 --fpr 0.05'
# S5: fit at a target far below 1/N is saved without a word (threshold later refuses it); a subnormal target leaks a numpy warning
SETUP='scores dev.txt'; run S5 '$CAL fit dev.txt --fpr 1e-300 --out c.json'
SETUP='scores dev.txt'; run S5b '$CAL fit dev.txt --fpr 5e-324 --out c.json'
# S6: npz X of complex numbers / of strings silently accepted
SETUP='$PY -c "
import numpy as np; r=np.random.default_rng(0)
np.savez(\"p.npz\", X=(r.normal(size=(240,8))+1j).astype(complex), labels=np.repeat([f\"c{i}\" for i in range(20)],12), sets=np.tile(np.repeat([\"a\",\"b\",\"c\"],4),20))"
printf "version: 1\ndata: {plugin: npz-patterns, path: p.npz}\ndistance: {plugin: euclidean}\nestimators: [{plugin: generic-interp}]\nevaluation: {targets: [0.05], prediction: false}\n" > r.yaml'
run S6 '$CAL run r.yaml --out out -q'
# S7: validate says ok, run refuses (transform check only at run time); version: true accepted as 1
SETUP='printf "version: 1\ndata: {plugin: synthetic-impostors, classes: 20, train: 100, test: 50}\ntransform: {plugin: similarity-to-distance, upper: 0}\n" > r.yaml'
run S7 '$CAL validate r.yaml; $CAL run r.yaml --out out -q'
SETUP='syn; sed -i "s/version: 1/version: true/" r.yaml'; run S7b '$CAL validate r.yaml'
# S8: closed stdout: results are lost, exit 0
SETUP='cal'; run S8 '$CAL threshold cal.json --class s03 --fpr 0.05 >&- ; echo "rc=$?" >&2'
# more tracebacks
SETUP='syn; ln -s lp lp'; run T16 '$CAL run r.yaml --out lp -q'
SETUP='syn'; run T16b '$CAL run r.yaml --out $(printf "a%.0s" $(seq 300)) -q'
SETUP='syn; printf "output: \"a\\\\0b\"\n" >> r.yaml'; run T16c 'cat r.yaml >&2; $CAL run r.yaml -q'
SETUP='scores dev.txt; mkdir sh; cp dev.txt sh/a.txt; $PY -c "import pyarrow as pa, pyarrow.parquet as pq; pq.write_table(pa.table({\"claimed_id\":[\"s50\"]*10,\"real_id\":[\"s51\"]*10,\"score\":[float(\"nan\")]*10}),\"sh/x.parquet\")"
printf "version: 1\ndata: {plugin: score-shards, path: sh, kind: similarity}\ntransform: {plugin: similarity-to-distance, upper: 1.0}\nestimators: [{plugin: generic-interp}]\nevaluation: {targets: [0.05], prediction: false}\n" > r.yaml'
run T17 '$CAL run r.yaml --out out -q'
SETUP='cal'; run T18 '$PY -c "import calibrate; calibrate.load(\"cal.json\").save(\"out/c\\0.json\")"'
# D4: the temporary name beside a user-named output is predictable and opened without O_EXCL/O_NOFOLLOW:
#     a symlink planted there redirects the write (victim overwritten) and the output becomes that symlink
SETUP='scores dev.txt; mkdir victim; echo victim > victim/v.txt'
run D4 '$PY -c "
import os; L=int(open(\"/proc/sys/kernel/ns_last_pid\").read())
for i in range(L, L+400): os.symlink(\"victim/v.txt\", f\".cal.json.tmp-{i}\")"; $CAL fit dev.txt --fpr 0.05 --no-predict --out cal.json; ls -l cal.json >&2; head -c 60 victim/v.txt >&2; echo >&2'
# S1c: one 2000-character label in one Parquet shard: exit 0, and then no class of the run can be looked up
SETUP='scores dev.txt; mkdir sh; cp dev.txt sh/a.txt; $PY -c "import pyarrow as pa, pyarrow.parquet as pq; pq.write_table(pa.table({\"claimed_id\":[\"s\"*2000]*10,\"real_id\":[\"s51\"]*10,\"score\":[0.3]*10}),\"sh/x.parquet\")"
printf "version: 1\ndata: {plugin: score-shards, path: sh, kind: similarity}\ntransform: {plugin: similarity-to-distance, upper: 1.0}\nestimators: [{plugin: generic-interp}]\nevaluation: {targets: [0.05], prediction: false}\n" > r.yaml'
run S1c '$CAL run r.yaml --out out -q && $CAL threshold out --class s01 --fpr 0.05'
# S9: a user-named output equal to an input silently replaces it
SETUP='cal'; run S9 '$CAL accept cal.json dev.txt --fpr 0.05 --out dev.txt 2>/dev/null; head -2 dev.txt >&2'
SETUP='cal'; run S9b '$CAL accept cal.json dev.txt --fpr 0.05 --out cal.json 2>/dev/null; head -c 60 cal.json >&2'
SETUP='scores dev.txt'; run S9c '$CAL fit dev.txt --fpr 0.05 --out newdir/ 2>/dev/null; ls -ld newdir >&2'
# M5: an .npz whose compressed member truly expands to 1.2 GB (file 1.2 MB): read whole before any cheap check
SETUP='$PY -c "
import numpy as np; np.savez_compressed(\"p.npz\", X=np.zeros((1,150_000_000)), labels=np.array([\"a\"]), sets=np.array([\"x\"]))"
printf "version: 1\ndata: {plugin: npz-patterns, path: p.npz}\ndistance: {plugin: euclidean}\nestimators: [{plugin: generic-interp}]\nevaluation: {targets: [0.05], prediction: false}\n" > r.yaml'
run M5 '$CAL run r.yaml --out out -q'
