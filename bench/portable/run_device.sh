#!/usr/bin/env bash
# The consumer-card code path on this GPU (bench/portable/README.md): --gpu-arch portable runs the compute_75 PTX
# of the generated kernels and the sm_75 mma.sync attention through the driver's JIT, as an RTX 20xx would.
#   steps: jit (cold and cached module load), check (tiny: every GPU op against the CPU reference), memcheck
#          (tiny under compute-sanitizer), large (image-large: portable vs native outputs and stage times),
#          budget (image-large on the portable path with another process holding all but 6, 4 and 3 GiB:
#          --memory-budget 6G must finish and match the uncapped run; 4 and 3 GiB: a run that fits or a clear
#          error before any work, never a crash), speed (each stage, native vs portable vs PyTorch eager
#          (bench/e2e/torch_pipeline.py) on the same weights, cond and 20k surface voxels, one call; timings only)
# Exit 1 when a check fails (FAIL lines). Needs the carried build-gpu/ (bench/ss_gpu/prepare.sh): lib/, tiny.exe,
# large.exe, trellis-mkmodel.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B=$ROOT/build-gpu
OUT=${OUT:-$ROOT/out-gpu}
STEPS=${*:-jit check memcheck large}
MAX_REL=${MAX_REL:-2e-3}
has() { [[ " $STEPS " == *" $1 "* ]]; }
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
status=0
fail() { echo "FAIL: $*"; status=1; }
nvidia-smi -L | tee "$OUT/device.txt"
T=/tmp/tiny
[[ -f $T/cond.npy ]] || "$B/trellis-mkmodel" --preset tiny --seed 1 --out $T --force --quiet
tiny() { "$B/tiny.exe" --model $T --cond $T/cond.npy --seed 1 --gpu require "$@"; }
loaded() { grep -o "kernels[^)]*modules loaded in [0-9.e-]* s" "$1" | head -1; }

if has jit; then
  export CUDA_CACHE_PATH=/tmp/portable-jit-cache
  rm -rf "$CUDA_CACHE_PATH"
  for run in cold cached; do
    tiny --out /tmp/p_jit --gpu-arch portable --stop-after ss > "$OUT/jit_$run.log" 2>&1 || fail "jit: $run run"
    echo "jit ($run driver cache): $(loaded "$OUT/jit_$run.log")"
  done
  tiny --out /tmp/n_jit --stop-after ss > "$OUT/jit_native.log" 2>&1 || fail "jit: native run"
  echo "native: $(loaded "$OUT/jit_native.log")"
  unset CUDA_CACHE_PATH
fi
if has check; then
  tiny --out /tmp/p_check --gpu-arch portable --gpu-check-ops --steps-slat 2 > "$OUT/check.log" 2>&1
  rc=$?; grep -E "matched|error" "$OUT/check.log" | tail -4
  [[ $rc == 0 ]] || fail "check: --gpu-check-ops on the portable path exited $rc"
fi
if has memcheck; then
  compute-sanitizer --tool memcheck --error-exitcode 1 "$B/tiny.exe" --model $T --cond $T/cond.npy --seed 1 \
    --gpu require --gpu-arch portable --steps-ss 2 --steps-slat 2 --out /tmp/p_mc > "$OUT/memcheck.log" 2>&1
  rc=$?; tail -1 "$OUT/memcheck.log"
  [[ $rc == 0 ]] || fail "memcheck: compute-sanitizer exited $rc on the portable path"
fi
if has large; then
  L=/tmp/large
  [[ -f $L/cond.npy ]] || "$B/trellis-mkmodel" --preset image-large --seed 1 --out $L --force --quiet
  for arch in native portable; do
    "$B/large.exe" --model $L --cond $L/cond.npy --seed 1 --gpu require --gpu-arch $arch --repeat 3 \
      --out /tmp/l_$arch > "$OUT/large_$arch.log" 2>&1 || fail "large: $arch run"
    echo "$arch: $(loaded "$OUT/large_$arch.log")"
    grep -E "^\[[123]/3 .*\] done in|^generation" "$OUT/large_$arch.log" | tail -5
  done
  # Stage 2 on the same voxels (fp16 near the occupancy threshold flips a few of stage 1's): both paths from
  # the native run's coords.npy, stage 1 skipped (so the SLat noise is drawn first in both).
  for arch in native portable; do
    cp /tmp/l_native/coords.npy /tmp/l_coords.npy
    "$B/large.exe" --model $L --cond $L/cond.npy --seed 1 --gpu require --gpu-arch $arch \
      --coords /tmp/l_coords.npy --out /tmp/l_${arch}_coords > "$OUT/large_${arch}_coords.log" 2>&1 ||
      fail "large: $arch run on the native voxels"
  done
  python3 - /tmp/l_native /tmp/l_portable /tmp/l_native_coords /tmp/l_portable_coords "$MAX_REL" <<'PY' || status=1
import sys
import numpy as np
native, portable, native_c, portable_c = sys.argv[1:5]
limit = float(sys.argv[5])
bad = False
def rel(x, y):
    x = x.astype(np.float64)
    return float(np.linalg.norm(x - y) / np.linalg.norm(x))
r = rel(np.load(f"{native}/ss_latent.npy"), np.load(f"{portable}/ss_latent.npy"))
bad |= r > limit
print(f"{'FAIL: ' if r > limit else ''}ss_latent: portable vs native rel L2 {r:.3e} (limit {limit:g})")
a = {tuple(v) for v in np.load(f"{native}/coords.npy")}
b = {tuple(v) for v in np.load(f"{portable}/coords.npy")}
flipped = len(a ^ b)
bad |= flipped > 0.01 * len(a)
print(f"{'FAIL: ' if flipped > 0.01 * len(a) else ''}voxels: {len(a)} native, {len(b)} portable, "
      f"{flipped} in one set only (limit 1%)")
r = rel(np.load(f"{native_c}/slat.npy"), np.load(f"{portable_c}/slat.npy"))
bad |= r > limit
print(f"{'FAIL: ' if r > limit else ''}slat on the native voxels: portable vs native rel L2 {r:.3e} (limit {limit:g})")
sys.exit(1 if bad else 0)
PY
fi
if has budget; then
  L=/tmp/large
  [[ -f $L/cond.npy ]] || "$B/trellis-mkmodel" --preset image-large --seed 1 --out $L --force --quiet
  python3 "$ROOT/bench/slat_gpu/make_coords.py" --voxels 20000 --out /tmp/b_surface.npy
  # Own stage 1, then the surface-like 20k voxels (--bench-stage1), all three formats.
  large() {
    "$B/large.exe" --model $L --cond $L/cond.npy --seed 1 --gpu require --gpu-arch portable \
      --coords /tmp/b_surface.npy --bench-stage1 "$@"
  }
  # Another process takes all but $1 GiB of the GPU with one plain allocation and holds it.
  hog() {
    rm -f /tmp/hog_ready
    python3 - "$1" > "$OUT/hog_$1.log" 2>&1 <<'PY' &
import sys, time, torch
free, total = torch.cuda.mem_get_info()
keep = int(float(sys.argv[1]) * 2**30)
x = torch.empty(max(free - keep, 0), dtype=torch.uint8, device="cuda")
print(f"hog: {torch.cuda.mem_get_info()[0] / 2**30:.2f} GiB left free of {total / 2**30:.1f}", flush=True)
open("/tmp/hog_ready", "w").write("1")
time.sleep(3600)
PY
    HOG=$!
    for _ in $(seq 120); do [[ -f /tmp/hog_ready ]] && break; sleep 0.5; done
    cat "$OUT/hog_$1.log"
  }
  # The process's device memory as nvidia-smi sees it (context included), sampled every 50 ms.
  smi_peak() {
    nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits -lms 50 > "$OUT/smi_$1.csv" &
    SMI=$!
  }
  smi_done() {
    kill $SMI 2> /dev/null; wait $SMI 2> /dev/null
    python3 -c "import sys
rows=[l.split(',') for l in open(sys.argv[1]) if l.strip()]
mine=[int(m) for p,m in rows if p.strip()!=sys.argv[2]]
print(f'nvidia-smi peak of the run: {max(mine) if mine else 0} MiB (context included)')" "$OUT/smi_$1.csv" "$HOG"
  }
  summary() { grep -E "\[gpu\] memory|done in|error" "$1" | sed -E 's/ on the GPU \(.*device memory/ ... device memory/' | tail -8; }
  echo "== uncapped"
  HOG=0; smi_peak free
  large --out /tmp/b_free > "$OUT/budget_free.log" 2>&1 || fail "budget: the uncapped run"
  smi_done free; summary "$OUT/budget_free.log"
  for case in "6 --memory-budget 6G" "4" "3" "3 --max-voxels 20000"; do
    set -- $case; gib=$1; shift
    tag="${gib}g$(echo "$*" | tr -dc 0-9)"
    echo "== ${gib} GiB left free, options: ${*:-none}"
    hog "$gib"; smi_peak "$tag"
    large --out /tmp/b_$tag "$@" > "$OUT/budget_$tag.log" 2>&1
    rc=$?
    smi_done "$tag"; kill $HOG; wait $HOG 2> /dev/null
    summary "$OUT/budget_$tag.log"
    if [[ $rc == 0 ]]; then
      python3 - /tmp/b_free /tmp/b_$tag <<'PY' || fail "budget: $tag outputs differ from the uncapped run"
import sys, os, filecmp
import numpy as np
a, b = sys.argv[1:3]
bad = False
for f in sorted(os.listdir(a)):
    same = filecmp.cmp(f"{a}/{f}", f"{b}/{f}", shallow=False)
    note = "bit-identical" if same else "DIFFERS"
    if not same and f.endswith(".npy"):
        x, y = np.load(f"{a}/{f}").astype(np.float64), np.load(f"{b}/{f}").astype(np.float64)
        note += f" (rel L2 {np.linalg.norm(x - y) / max(np.linalg.norm(x), 1e-30):.3e})" if x.shape == y.shape else " (shape)"
    bad |= not same
    print(f"  {f}: {note}")
sys.exit(1 if bad else 0)
PY
    elif (( rc >= 128 )); then
      fail "budget: $tag crashed (exit $rc)"
    else
      echo "  exit $rc: $(grep -m1 error "$OUT/budget_$tag.log")"
      left=$(ls /tmp/b_$tag 2> /dev/null | wc -l)
      [[ $left == 0 ]] || fail "budget: $tag failed but left $left files"
      [[ $gib == 6 ]] && fail "budget: the 6 GiB run must finish"
    fi
  done
fi
if has speed; then
  L=/tmp/large
  [[ -f $L/cond.npy ]] || "$B/trellis-mkmodel" --preset image-large --seed 1 --out $L --force --quiet
  [[ -f /tmp/b_surface.npy ]] || python3 "$ROOT/bench/slat_gpu/make_coords.py" --voxels 20000 --out /tmp/b_surface.npy
  # Stage 1 on its own voxels (--stop-after ss), stages 2-3 on the surface (--coords): the last of 3 runs.
  for arch in native portable; do
    for what in "--stop-after ss" "--coords /tmp/b_surface.npy"; do
      "$B/large.exe" --model $L --cond $L/cond.npy --seed 1 --gpu require --gpu-arch $arch --repeat 3 \
        $what --out /tmp/s_$arch > "$OUT/speed_${arch}_${what%% *}.log" 2>&1 || fail "speed: $arch $what"
    done
    python3 - "$arch" "$OUT/speed_${arch}_--stop-after.log" "$OUT/speed_${arch}_--coords.log" <<'PY'
import re, sys
arch, ss_log, rest_log = sys.argv[1:4]
def stages(path):  # the last run's stage lines: (title, wall s, GPU s)
    rows = re.findall(r"^\[(\d)/3 [^]]*\] done in ([0-9.e-]+) s on the GPU \(([0-9.e-]+) s of GPU time", open(path).read(), re.M)
    return rows
ss = stages(ss_log)[-1]
rest = stages(rest_log)
slat = [r for r in rest if r[0] == "2"][-1]
dec = [r for r in rest if r[0] == "3"][-3:]  # mesh, gs, rf decoders
print(f"{arch}: ss {float(ss[1])*1e3:.0f} ms (GPU {float(ss[2])*1e3:.0f}); slat (20k surface) {float(slat[1])*1e3:.0f} ms "
      f"(GPU {float(slat[2])*1e3:.0f}); decoders mesh/gs/rf " + "/".join(f"{float(d[1])*1e3:.0f}" for d in dec) + " ms")
PY
  done
  for what in "" "--coords /tmp/b_surface.npy"; do
    python3 "$ROOT/bench/e2e/torch_pipeline.py" --model $L --mode eager --generations 2 --warmup 1 --seed 1 \
      $what --json "$OUT/speed_torch${what:+_coords}.json" > "$OUT/speed_torch${what:+_coords}.log" 2>&1 ||
      fail "speed: PyTorch eager $what"
    python3 -c "import json,sys; m=json.load(open(sys.argv[1]))['eager']; print('PyTorch eager${what:+ (surface)}:', {k: round(v) for k, v in m['stages_ms'].items()}, 'ms; voxels', m.get('voxels'))" \
      "$OUT/speed_torch${what:+_coords}.json"
  done
fi
echo "portable path: $([[ $status == 0 ]] && echo all steps passed || echo FAILED)"
exit $status
