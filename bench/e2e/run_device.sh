#!/usr/bin/env bash
# A generation end to end on a GPU machine, in one go (bench/e2e/README.md): trellisc's engine warm
# (generations through one trellis.exe process), trellis.exe cold (one process per generation), the
# PyTorch pipeline (bench/e2e/torch_pipeline.py), on the same weights (image-large, trellis-mkmodel seed 1)
# and inputs, for two voxel sets: the pipeline's own stage 1 and a ~19k-voxel surface shell (--coords).
# Needs build-gpu/ from bench/ss_gpu/prepare.sh (+ bench/tools/build.sh for the kernel trace).
#   run_device.sh [steps]   steps: model warm vary full cold torch-eager torch-compile trace check memcheck
#                           (default: model warm vary full cold trace)
# vary: generations through one engine on surface shells of 18000, 18500, ..., 20000 voxels (a new voxel
# set every generation, as real objects give; stage 1 skipped: the synthetic weights' own stage 1 gives
# scattered sets, see README), then a second cycle of shells 100 voxels larger (timed): every voxel count
# is new, every GEMM shape bucket already tuned.
# full: the same, with stage 1 run every generation (--bench-stage1: its voxels are replaced by the shell's),
# the issue's warm scenario with stage 1 included on a real-object-like voxel set.
# Writes logs and e2e_*.json under $OUT; bench/e2e/report.py prints the table from them.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B=$ROOT/build-gpu
OUT=${OUT:-$ROOT/out-gpu}
M=/tmp/large
W=/tmp/e2e
GENS=${GENS:-3}    # timed generations (after one warm-up)
BUDGET_S=${BUDGET_S:-0}  # the device call's time limit (0: none); the PyTorch runs fit in what is left
START=$(date +%s)
mkdir -p "$OUT" "$W"
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export TRELLIS_CACHE_DIR=$W/cache   # the GEMM tuning cache: filled by the first process
STEPS=${*:-model warm vary full cold trace}
status=0   # the check and memcheck steps fail the script (exit 1) when they miss
has() { [[ " $STEPS " == *" $1 "* ]]; }
log() { echo "== $* ==" | tee -a "$OUT/summary.txt"; }
nvidia-smi -L | tee "$OUT/device.txt"

# Peak device memory of a command: nvidia-smi sampled every 50 ms (context included, as a user sees it).
peak_mem() { # peak_mem NAME CMD...
  local name=$1; shift
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 50 > "$W/$name.mem" &
  local smi=$!
  "$@"; local rc=$?
  kill $smi; wait $smi 2>/dev/null
  echo "$name peak_mib $(sort -n "$W/$name.mem" | tail -1) rc $rc" | tee -a "$OUT/memory.txt"
  return $rc
}
manifest() { # manifest FILE COUNT [COORDS]: seeds 1..COUNT, the model's cond
  python3 - "$@" <<'PY'
import json, sys
path, n = sys.argv[1], int(sys.argv[2])
coords = sys.argv[3] if len(sys.argv) > 3 else None
with open(path, "w") as f:
    for s in range(1, n + 1):
        line = {"id": f"g{s}", "cond": "/tmp/large/cond.npy", "seed": s}
        if coords:
            line["coords"] = coords
        f.write(json.dumps(line) + "\n")
PY
}

if has model; then
  log "model: image-large (trellis-mkmodel seed 1), surface shell coords"
  ( time "$B/trellis-mkmodel" --preset image-large --seed 1 --out $M --force --quiet ) 2>&1 | tail -3
  python3 "$ROOT/bench/slat_gpu/make_coords.py" --voxels 19000 --res 64 --out $W/surface.npy
  for n in 18000 18500 19500 20000 18100 19100 18600 20100 19600; do
    python3 "$ROOT/bench/slat_gpu/make_coords.py" --voxels $n --res 64 --out $W/surface_$n.npy
  done
fi
SETS=${SETS:-own surface}
set_args() { [[ $1 == surface ]] && echo "--coords $W/surface.npy"; }

if has warm; then
  for set in $SETS; do
    log "warm ($set): 1 + $GENS generations through one engine (trellis.exe --inputs), files written"
    manifest $W/m_$set.jsonl $((GENS + 1)) $([[ $set == surface ]] && echo $W/surface.npy)
    rm -rf $W/warm_$set
    peak_mem warm_$set "$B/large.exe" --model $M --inputs $W/m_$set.jsonl --out $W/warm_$set \
      > "$OUT/warm_$set.log" 2>&1
    grep -E "^generation|generations written|engine ready" "$OUT/warm_$set.log" | tee -a "$OUT/summary.txt"
  done
fi
i=0
for n in 18000 19000 18500 20000 19500 18100 19100 18600 20100 19600; do
  i=$((i + 1))
  c=$W/surface_$n.npy; [[ $n == 19000 ]] && c=$W/surface.npy
  echo "{\"id\": \"v$i\", \"cond\": \"$M/cond.npy\", \"seed\": $i, \"coords\": \"$c\"}"
done > $W/m_vary.jsonl
for run in vary full; do
  has $run || continue
  if [[ $run == vary ]]; then
    log "vary: 10 generations through one engine, a new surface shell each (18000..20100 voxels, two cycles)"
  else
    log "full: as vary, with stage 1 run every generation (--bench-stage1: its voxels replaced by the shell)"
  fi
  rm -rf $W/$run
  peak_mem $run "$B/large.exe" --model $M --inputs $W/m_vary.jsonl --out $W/$run \
    $([[ $run == full ]] && echo --bench-stage1) > "$OUT/$run.log" 2>&1
  grep -E "^generation|generations written|engine ready" "$OUT/$run.log" | tee -a "$OUT/summary.txt"
done
if has cold; then
  for set in $SETS; do
    for i in 1 2; do
      log "cold ($set) $i: one trellis.exe process, one generation"
      rm -rf $W/cold
      start=$(date +%s.%N)
      peak_mem cold_${set}_$i "$B/large.exe" --model $M --cond $M/cond.npy --seed 1 $(set_args $set) \
        --out $W/cold > "$OUT/cold_${set}_$i.log" 2>&1
      end=$(date +%s.%N)
      echo "cold_${set}_$i process_wall_s $(python3 -c "print(round($end - $start, 3))")" | tee -a "$OUT/summary.txt"
      grep -E "^generation|engine ready" "$OUT/cold_${set}_$i.log" | tee -a "$OUT/summary.txt"
    done
  done
fi
if has trace; then
  # The GPU's busy share of one warm generation: the kernel trace of the same run again, over a window of the
  # last generation's wall time (from the run without the tracer).
  for set in $SETS vary full; do
    extra=
    if [[ $set == vary || $set == full ]]; then log_=$set; man=$W/m_vary.jsonl; last=v10; else
      log_=warm_$set; man=$W/m_$set.jsonl; last=g$((GENS + 1)); fi
    [[ $set == full ]] && extra=--bench-stage1
    [[ -f "$OUT/$log_.log" ]] || continue
    wall_ms=$(grep -E "^generation $last:" "$OUT/$log_.log" | sed -E 's/.*: ([0-9.]+) s wall.*/\1/' \
      | python3 -c "import sys; print(int(float(sys.stdin.read()) * 1000))")
    log "trace ($set): kernel trace over the last generation's $wall_ms ms"
    rm -rf $W/trace
    CUDA_INJECTION64_PATH=$B/libkernel_trace.so KERNEL_TRACE_WINDOW_MS=$wall_ms \
      "$B/large.exe" --model $M --inputs $man --out $W/trace $extra > "$OUT/trace_$set.log" 2>&1
    grep -E "^generation $last:" "$OUT/trace_$set.log" | tee -a "$OUT/summary.txt"
    grep -E "span|busy|idle" "$OUT/trace_$set.log" | head -4 | tee -a "$OUT/summary.txt"
  done
fi
if has check; then
  log "check: a reused engine gives a fresh process's bits (image-large, GPU; a different voxel set between)"
  python3 - "$W" <<'PY'
import json
w = __import__("sys").argv[1]
with open(f"{w}/m_check.jsonl", "w") as f:
    for i, (s, c) in enumerate([(1, None), (2, f"{w}/surface.npy"), (1, None)]):
        f.write(json.dumps({"id": f"c{i}", "cond": "/tmp/large/cond.npy", "seed": s,
                            **({"coords": c} if c else {})}) + "\n")
PY
  rm -rf $W/check $W/fresh
  "$B/large.exe" --model $M --inputs $W/m_check.jsonl --out $W/check > "$OUT/check.log" 2>&1
  "$B/large.exe" --model $M --cond $M/cond.npy --seed 1 --out $W/fresh > "$OUT/fresh.log" 2>&1
  fails=0
  for f in ss_latent.npy coords.npy slat.npy gaussians.ply gaussians.npz radiance_field.npz mesh.ply mesh.glb; do
    for c in c0 c2; do
      cmp -s $W/fresh/$f $W/check/$c/$f || { echo "DIFFERS: $c/$f" | tee -a "$OUT/summary.txt"; fails=1; }
    done
  done
  echo "check: reused engine vs fresh process: $([[ $fails == 0 ]] && echo identical || echo DIFFERENT)" \
    | tee -a "$OUT/summary.txt"
  [[ $fails == 0 ]] || status=1
fi
if has memcheck; then
  log "memcheck: tiny preset through one engine, two generations of different voxel counts"
  T=/tmp/tiny
  "$B/trellis-mkmodel" --preset tiny --seed 1 --out $T --force --quiet
  "$B/tiny.exe" --model $T --cond $T/cond.npy --out $W/tiny_ss --stop-after ss --seed 1 > /dev/null 2>&1
  python3 -c "import numpy as np; c=np.load('$W/tiny_ss/coords.npy'); np.save('$W/tiny_half.npy', c[:len(c)//2])"
  printf '{"id":"a","cond":"%s","seed":1}\n{"id":"b","cond":"%s","seed":2,"coords":"%s"}\n' \
    $T/cond.npy $T/cond.npy $W/tiny_half.npy > $W/m_tiny.jsonl
  compute-sanitizer --tool memcheck --error-exitcode 9 "$B/tiny.exe" --model $T --inputs $W/m_tiny.jsonl \
    --out $W/tiny_mc --gpu require --steps-ss 2 --steps-slat 2 > "$OUT/memcheck.log" 2>&1
  rc=$?
  echo "memcheck rc=$rc" | tee -a "$OUT/summary.txt"
  [[ $rc == 0 ]] || status=1
  grep -E "ERROR SUMMARY|^generation" "$OUT/memcheck.log" | tee -a "$OUT/summary.txt"
fi
# PyTorch last: torch.compile's compilation takes minutes. With BUDGET_S (the device call's limit in seconds),
# each PyTorch run gets the time left (less a margin for the report), and one that cannot start is skipped.
for mode in eager compile; do
  has torch-$mode || continue
  for set in $SETS; do
    limit=${TORCH_TIMEOUT:-560}
    if (( BUDGET_S > 0 )); then
      left=$(( BUDGET_S - ($(date +%s) - START) - 20 ))
      (( left < limit )) && limit=$left
    fi
    if (( limit < 30 )); then
      echo "torch_${mode}_$set skipped: the call's time budget is spent" | tee -a "$OUT/summary.txt"
      continue
    fi
    log "PyTorch $mode ($set): bench/e2e/torch_pipeline.py, 1 + $GENS generations (limit $limit s)"
    peak_mem torch_${mode}_$set timeout $limit python3 "$ROOT/bench/e2e/torch_pipeline.py" --model $M --mode $mode \
      --generations $GENS --warmup 1 --seed 1 $(set_args $set) --json "$OUT/e2e_torch_${mode}_$set.json" \
      > "$OUT/torch_${mode}_$set.log" 2>&1
    rc=$?
    [[ $rc == 124 ]] && echo "torch_${mode}_$set timed out after $limit s" | tee -a "$OUT/summary.txt"
    tail -4 "$OUT/torch_${mode}_$set.log" | tee -a "$OUT/summary.txt"
  done
done
python3 "$ROOT/bench/e2e/report.py" "$OUT" | tee "$OUT/report.md"
exit $status
