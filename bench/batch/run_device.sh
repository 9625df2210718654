#!/usr/bin/env bash
# A sharded manifest on one GPU (bench/batch/README.md): JOBS generations of the image-large synthetic model as one
# trellis.exe batch, then as two processes at once (--shard 0/2 and 1/2, as two Slurm array tasks sharing a GPU
# would), with the records merged by --summarize. Prints each form's wall time and generations per hour; exits 1
# when a job is missing or failed. Needs the carried build-gpu/ (bench/ss_gpu/prepare.sh): lib/, large.exe,
# trellis-mkmodel.
#   env: OUT (logs), JOBS (default 8), STEPS (sampler steps per stage; default the compiled ones)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B=$ROOT/build-gpu
OUT=${OUT:-$ROOT/out-gpu}
JOBS=${JOBS:-8}
M=/tmp/large
W=/tmp/batch-bench
mkdir -p "$OUT" && rm -rf "$W" && mkdir -p "$W"
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export TRELLIS_CACHE_DIR=$W/cache # one GEMM tuning cache for every process (filled by the warm-up)
nvidia-smi -L | tee "$OUT/device.txt"
[[ -f $M/cond.npy ]] || "$B/trellis-mkmodel" --preset image-large --seed 1 --out $M --force --quiet
steps=()
[[ -n ${STEPS:-} ]] && steps=(--steps-ss "$STEPS" --steps-slat "$STEPS")
python3 - "$M/cond.npy" "$JOBS" > "$W/manifest.jsonl" <<'PY'
import json, sys
for i in range(int(sys.argv[2])):
    print(json.dumps({"id": f"a{i:03d}", "cond": sys.argv[1], "seed": 1000 + i}))
PY
status=0
run() { # run NAME OUTDIR [args]: one process, its log in $OUT/NAME.log
  local name=$1 out=$2; shift 2
  "$B/large.exe" --model $M --inputs "$W/manifest.jsonl" --out "$out" "${steps[@]}" "$@" > "$OUT/$name.log" 2>&1
}
# Warm-up: the GEMM picks timed once, for all the runs below.
python3 -c "import json,sys; print(json.dumps({'id':'warm','cond':sys.argv[1],'seed':1}))" "$M/cond.npy" > "$W/warm.jsonl"
"$B/large.exe" --model $M --inputs "$W/warm.jsonl" --out "$W/warm" "${steps[@]}" > "$OUT/warmup.log" 2>&1
t0=$(date +%s.%N); run one "$W/one"; rc1=$?; t1=$(date +%s.%N)
run shard0 "$W/two" --shard 0/2 & p0=$!
run shard1 "$W/two" --shard 1/2 & p1=$!
wait $p0; rc2=$?; wait $p1; rc3=$?; t2=$(date +%s.%N)
for f in one two; do
  "$B/large.exe" --summarize "$W/$f" > "$OUT/summary_$f.txt"; rc=$?
  (( rc == 0 )) || { echo "FAIL: $f: --summarize exited $rc"; status=1; }
  n=$(ls "$W/$f"/*/done.json 2>/dev/null | wc -l)
  (( n == JOBS )) || { echo "FAIL: $f: $n of $JOBS jobs done"; status=1; }
done
(( rc1 == 0 && rc2 == 0 && rc3 == 0 )) || { echo "FAIL: exit statuses $rc1 $rc2 $rc3"; status=1; }
python3 - "$t0" "$t1" "$t2" "$JOBS" <<'PY'
import sys
t0, t1, t2, n = map(float, sys.argv[1:])
one, two = t1 - t0, t2 - t1
print(f"| form | wall s (process start to exit) | generations per hour |\n|---|---|---|")
print(f"| one process, {n:.0f} jobs | {one:.1f} | {3600 * n / one:.0f} |")
print(f"| two processes at once (--shard 0/2, 1/2), one GPU | {two:.1f} | {3600 * n / two:.0f} |")
print(f"\ntwo shards / one process: {one / two:.2f}x the throughput")
PY
echo "one process:"; cat "$OUT/summary_one.txt"; echo "two shards:"; cat "$OUT/summary_two.txt"
exit $status
