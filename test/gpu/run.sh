#!/usr/bin/env bash
# The device tests in one command, on the GPU machine (test/gpu/README.md): every GPU check of the suites,
# each against its threshold, the exit status non-zero when any check misses (its "FAIL: ..." line says
# which). Needs build-gpu/ from bench/ss_gpu/prepare.sh (carried; the GPU machine has no LLVM/MLIR).
#   test/gpu/run.sh [--large] [SUITE...]     SUITE: ss slat mesh engine image portable (default: all six)
#     ss      stage 1 (bench/ss_gpu/run_device.sh tiny memcheck kernels capi faults [large])
#     slat    the SLat stage and decoders (bench/slat_gpu/run_device.sh tiny check full memcheck [large torch])
#     mesh    FlexiCubes on the GPU (bench/mesh_gpu/run_device.sh bench tiny memcheck [large])
#     engine  the engine (bench/e2e/run_device.sh memcheck [model check])
#     image   images in (bench/image_gpu/run_device.sh tiny multi [large]; needs bench/image_gpu/prepare.sh)
#     portable  the consumer-card code (--gpu-arch portable) on this GPU (bench/portable/run_device.sh check
#             memcheck [large budget])
#   --large   also the image-large checks: parity against the fp32 PyTorch reference, the 256^3 mesh, a
#             reused engine's bits against a fresh process's, the portable path against the native one and
#             under a 6/4/3 GiB cap (another process holding the rest)
# Thresholds are the suites' (test/gpu/README.md); SS_MAX_REL_L2 / SS_MIN_OCC (stage 1), TINY_MAX and
# PARITY_MAX (SLat stage) override them, e.g. `TINY_MAX=1e-9 test/gpu/run.sh slat` must fail.
# Logs under $OUT/<suite>/ (default ./out-gpu).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$ROOT/out-gpu}
large=0
suites=()
for a in "$@"; do
  case $a in
    --large) large=1 ;;
    ss|slat|mesh|engine|image|portable) suites+=("$a") ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "test/gpu/run.sh: unknown argument '$a' (see --help)" >&2; exit 2 ;;
  esac
done
(( ${#suites[@]} )) || suites=(ss slat mesh engine image portable)
[[ -x $ROOT/build-gpu/tiny.exe ]] || { echo "test/gpu/run.sh: build-gpu/ is missing (bench/ss_gpu/prepare.sh)" >&2; exit 2; }
[[ " ${suites[*]} " != *" image "* || -f $ROOT/build-gpu/image.tar.xz ]] || { echo "test/gpu/run.sh: build-gpu/image.tar.xz is missing (bench/image_gpu/prepare.sh)" >&2; exit 2; }

steps() { # the check steps of a suite (never its timings)
  case $1 in
    ss) echo "tiny memcheck kernels capi faults$( ((large)) && echo ' large')" ;;
    slat) echo "tiny check full memcheck$( ((large)) && echo ' large torch')" ;;
    mesh) echo "bench tiny memcheck$( ((large)) && echo ' large')" ;;
    engine) echo "$( ((large)) && echo 'model check ')memcheck" ;;
    image) echo "tiny multi$( ((large)) && echo ' large')" ;;
    portable) echo "check memcheck$( ((large)) && echo ' large budget')" ;;
  esac
}
script() {
  case $1 in
    ss) echo bench/ss_gpu/run_device.sh ;; slat) echo bench/slat_gpu/run_device.sh ;;
    mesh) echo bench/mesh_gpu/run_device.sh ;; engine) echo bench/e2e/run_device.sh ;;
    image) echo bench/image_gpu/run_device.sh ;;
    portable) echo bench/portable/run_device.sh ;;
  esac
}
failed=()
for s in "${suites[@]}"; do
  mkdir -p "$OUT/$s"
  echo "== $s: $(script "$s") $(steps "$s") =="
  start=$(date +%s)
  # shellcheck disable=SC2046
  OUT=$OUT/$s bash "$ROOT/$(script "$s")" $(steps "$s") > "$OUT/$s/run.log" 2>&1
  rc=$?
  grep -h "FAIL" "$OUT/$s/run.log" | head -20
  if [[ $rc == 0 ]]; then echo "$s: passed ($(( $(date +%s) - start )) s)"
  else echo "$s: FAILED (exit $rc; $OUT/$s/run.log)"; failed+=("$s"); fi
done
if (( ${#failed[@]} )); then
  echo "test/gpu/run.sh: FAILED: ${failed[*]}"
  exit 1
fi
echo "test/gpu/run.sh: all passed (${suites[*]}$( ((large)) && echo ', large'))"
