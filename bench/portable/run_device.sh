#!/usr/bin/env bash
# The consumer-card code path on this GPU (bench/portable/README.md): --gpu-arch portable runs the compute_75 PTX
# of the generated kernels and the sm_75 mma.sync attention through the driver's JIT, as an RTX 20xx would.
#   steps: jit (cold and cached module load), check (tiny: every GPU op against the CPU reference), memcheck
#          (tiny under compute-sanitizer), large (image-large: portable vs native outputs and stage times)
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
echo "portable path: $([[ $status == 0 ]] && echo all steps passed || echo FAILED)"
exit $status
