#!/usr/bin/env bash
# trellis-serve under load on a GPU machine (bench/serve/README.md): the server's generations per hour per GPU
# with clients keeping its engines busy, against one trellis.exe process per generation (engine setup paid
# every time), latency with one client, and the queue's behaviour when it overflows. Prints one table.
# Needs the carried build-gpu/ (bench/ss_gpu/prepare.sh + build-gpu/trellis-serve): lib/ (LD_LIBRARY_PATH),
# trellis-serve, trellis-mkmodel, large.exe (PRESET=large, the default) or tiny.exe (PRESET=tiny).
#   run_device.sh [steps]   steps: model serve exe single queue (default: all of them)
#   env: OUT (logs, JSON, report.md), PRESET large|tiny, JOBS (timed jobs of the serve step; default 16 large,
#        32 tiny), CLIENTS (default 2 per GPU), EXE_RUNS (default 4), STEPS_SS / STEPS_SLAT (sampler steps;
#        default the compiled ones), SERVER_ARGS (more trellis-serve options), BUDGET_S (the call's limit)
# serve: load.py --start, CLIENTS clients, one warm-up job per GPU (not counted: an engine's first run tunes
#        its GEMMs), JOBS timed; with exe, then EXE_RUNS generations of one PROGRAM process each (one at a time
#        per GPU, after one untimed process that fills the GEMM tuning cache), same seeds, formats, steps.
# single: one client, 5 jobs (after a warm-up one per GPU): the latency of a generation with nothing queued.
# queue: --queue 2 and 8 clients per GPU: the 429s, Retry-After, the deepest queue.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B=$ROOT/build-gpu
OUT=${OUT:-$ROOT/out-gpu}
PRESET=${PRESET:-large}
M=/tmp/$PRESET
PROG=$B/$PRESET.exe
W=/tmp/serve-bench
BUDGET_S=${BUDGET_S:-0}
START=$(date +%s)
mkdir -p "$OUT" "$W"
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export TRELLIS_CACHE_DIR=$W/cache   # trellis.exe's GEMM tuning cache (the exe step's warm-up process fills it)
STEPS=${*:-model serve exe single queue}
has() { [[ " $STEPS " == *" $1 "* ]]; }
log() { echo "== $* ==" | tee -a "$OUT/summary.txt"; }
status=0

nvidia-smi -L | tee "$OUT/device.txt"
if ldd "$B/trellis-serve" | grep 'not found'; then
  echo "trellis-serve lacks the libraries above: copy them into build-gpu/lib here (bench/serve/README.md)"
  exit 1
fi
GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
(( GPUS > 0 )) || GPUS=1
CLIENTS=${CLIENTS:-$((2 * GPUS))}
JOBS=${JOBS:-$([[ $PRESET == tiny ]] && echo 32 || echo 16)}
EXE_RUNS=${EXE_RUNS:-4}
STEP_ARGS=()
[[ -n ${STEPS_SS:-} ]] && STEP_ARGS+=(--steps-ss "$STEPS_SS")
[[ -n ${STEPS_SLAT:-} ]] && STEP_ARGS+=(--steps-slat "$STEPS_SLAT")
(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null) > "$OUT/commit.txt" || true

# The time left in the call, less a margin for the report; load.py's --timeout.
left() {
  if (( BUDGET_S > 0 )); then echo $(( BUDGET_S - ($(date +%s) - START) - 15 )); else echo 600; fi
}

if has model; then
  log "model: $PRESET (trellis-mkmodel seed 1)"
  ( time "$B/trellis-mkmodel" --preset "$([[ $PRESET == large ]] && echo image-large || echo tiny)" --seed 1 \
      --out "$M" --force --quiet ) 2>&1 | tail -3
fi
[[ -f $M/cond.npy ]] || { echo "no model in $M: run the model step"; exit 1; }

load() { # load NAME load.py-options...
  local name=$1; shift
  local t; t=$(left)
  if (( t < 30 )); then
    echo "$name skipped: the call's time budget is spent" | tee -a "$OUT/summary.txt"
    return
  fi
  log "$name: load.py $* (timeout $t s)"
  python3 "$ROOT/bench/serve/load.py" --start "$PROG" --model "$M" --server "$B/trellis-serve" \
    --server-log "$OUT/server_$name.log" --devices "$GPUS" --timeout "$t" --label "$name" \
    --json "$OUT/serve_$name.json" "${STEP_ARGS[@]}" "$@" 2>&1 | tee "$OUT/load_$name.log"
  local rc=${PIPESTATUS[0]}
  echo "$name: load.py exit status $rc" | tee -a "$OUT/summary.txt"
  (( rc == 0 )) || status=1
}

if has serve; then
  extra=()
  has exe && extra=(--exe-runs "$EXE_RUNS")
  load serve --clients "$CLIENTS" --jobs "$JOBS" --warmup "$GPUS" --server-args "${SERVER_ARGS:-}" "${extra[@]}"
fi
if has single; then
  load single --clients 1 --jobs 5 --warmup "$GPUS" --server-args "${SERVER_ARGS:-}"
fi
if has queue; then
  load queue --clients $((8 * GPUS)) --jobs $((8 * GPUS + 8)) --warmup "$GPUS" --max-backoff 2 \
    --server-args "--queue 2 ${SERVER_ARGS:-}"
fi

python3 - "$OUT" "$PRESET" "$GPUS" <<'PY' | tee "$OUT/report.md"
import json, sys
from pathlib import Path
out, preset, gpus = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
def f(x, d=2, unit=""):
    return "—" if x is None else f"{x:.{d}f}{unit}"
device = (out / "device.txt").read_text().splitlines()[0] if (out / "device.txt").exists() else "?"
commit = (out / "commit.txt").read_text().strip() if (out / "commit.txt").exists() else "?"
print(f"\ntrellis-serve, {preset}, {gpus} × {device.split(':', 1)[-1].split('(')[0].strip()}, code {commit}\n")
print("| run | clients | jobs done / asked | gens/hour | per GPU | latency p50 s | p99 s | queue wait p50 s "
      "| 429s | max queue | server run s (mean) | ready s | device MiB |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
exe = None
for name in ("serve", "single", "queue"):
    p = out / f"serve_{name}.json"
    if not p.exists():
        continue
    r = json.loads(p.read_text())
    mem = [v for v in (r.get("device_memory_bytes") or {}).values() if v]
    print(f"| {name} | {r['clients']} | {r['done']} / {r['jobs']} | {f(r['per_hour'], 0)} "
          f"| {f(r['per_hour_per_device'], 0)} | {f(r['latency_s']['p50'])} | {f(r['latency_s']['p99'])} "
          f"| {f(r['queue_wait_s']['p50'])} | {r['rejected_429']} | {r['max_queue_depth']:.0f} "
          f"| {f(r['server_generation_s'])} | {f(r['server_ready_s'])} "
          f"| {' / '.join(f'{v / 2**20:.0f}' for v in mem) or '—'} |")
    exe = exe or r.get("exe")
if exe:
    walls = sorted(exe["walls_s"])
    p50 = walls[len(walls) // 2] if walls else None
    print(f"| one trellis.exe per generation | — | {exe['ok']} / {exe['runs']} | {f(exe['per_hour'], 0)} "
          f"| {f(exe['per_hour_per_device'], 0)} | {f(p50)} (process) | {f(walls[-1] if walls else None)} "
          f"| — | — | — | — | — | — |")
    s = json.loads((out / "serve_serve.json").read_text())
    if s.get("per_hour_per_device") and exe.get("per_hour_per_device"):
        print(f"\nserver / one process per generation, generations per hour per GPU: "
              f"{s['per_hour_per_device'] / exe['per_hour_per_device']:.2f}×")
PY
exit $status
