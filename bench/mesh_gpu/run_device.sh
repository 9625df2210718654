#!/usr/bin/env bash
# The issue-7 GPU FlexiCubes check-and-measure run on a GPU machine (bench/mesh_gpu/README.md).
# Needs $B (default build-gpu/, from bench/ss_gpu/prepare.sh: trellis-flexicubes-bench, trellis-mkmodel,
# tiny.exe and large.exe compiled with --target=cuda by the same build, lib/ with the Debian libraries
# they link). Writes everything under $OUT (default ./out-gpu). Steps can be picked:
#   run_device.sh bench tiny large memcheck        (default: bench tiny large)
#   bench     parity of the built-in cases + timing (trellis-flexicubes-bench)
#   tiny      tiny preset through tiny.exe: FlexiCubes on the GPU vs --mesh-cpu (mesh.ply/.glb bytes),
#             and the bench's parity on its mesh_fields.npz
#   large     image-large, decoders on a ${VOXELS:-20000}-voxel shell (bench/slat_gpu/make_coords.py):
#             the same for the 256^3 mesh
#   memcheck  the small built-in parity cases under compute-sanitizer
# Exit status 1 when a check fails: a parity case of the bench or of a pipeline's mesh_fields.npz, a
# pipeline run that exits non-zero, memcheck errors (or compute-sanitizer missing). The mesh.ply / .glb
# byte comparison is informational only (see same() below).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B=${B:-$ROOT/build-gpu}
OUT=${OUT:-$ROOT/out-gpu}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
STEPS=${*:-bench tiny large}
status=0
log() { echo "== $* ==" | tee -a "$OUT/summary.txt"; }
has() { [[ " $STEPS " == *" $1 "* ]]; }
nvidia-smi -L | tee "$OUT/device.txt"
same() { # same A B: byte-identical files? Informational, never fails the script: GPU and CPU positions
  # may differ in the last bit (tanh/exp evaluated in double on the GPU vs glibc's tanhf/expf, README),
  # so the files usually differ; the bench's parity on mesh_fields.npz (faces identical, positions and
  # attributes within --tolerance) is the check.
  if cmp -s "$1" "$2"; then echo "$(basename "$1"): GPU and CPU outputs byte-identical"; else echo "$(basename "$1"): bytes differ"; fi | tee -a "$OUT/summary.txt"
}
pipeline() { # pipeline NAME EXE MODEL R [args...]: GPU and --mesh-cpu runs, compare outputs
  local name=$1 exe=$2 model=$3 res=$4; shift 4
  local rc
  "$exe" --model "$model" --cond "$model/cond.npy" --seed 1 --formats mesh --debug-outputs --out /tmp/${name}_gpu "$@" > "$OUT/${name}_gpu.log" 2>&1
  rc=$?
  echo "$name gpu rc=$rc" | tee -a "$OUT/summary.txt"
  [[ $rc == 0 ]] || status=1
  "$exe" --model "$model" --cond "$model/cond.npy" --seed 1 --formats mesh --debug-outputs --out /tmp/${name}_cpu --mesh-cpu "$@" > "$OUT/${name}_cpu.log" 2>&1
  rc=$?
  echo "$name cpu rc=$rc" | tee -a "$OUT/summary.txt"
  [[ $rc == 0 ]] || status=1
  grep -h "FlexiCubes\|mesh:" "$OUT/${name}_gpu.log" "$OUT/${name}_cpu.log" | tee -a "$OUT/summary.txt"
  same /tmp/${name}_gpu/mesh.ply /tmp/${name}_cpu/mesh.ply
  same /tmp/${name}_gpu/mesh.glb /tmp/${name}_cpu/mesh.glb
  "$B/trellis-flexicubes-bench" --only-npz --no-timing --npz /tmp/${name}_gpu/mesh_fields.npz --resolution "$res" 2>&1 \
    | tee -a "$OUT/summary.txt"
  rc=${PIPESTATUS[0]}
  echo "$name parity rc=$rc" | tee -a "$OUT/summary.txt"
  [[ $rc == 0 ]] || status=1
}

if has bench; then
  log "bench: parity of the built-in cases, timing of the 20k-voxel shell"
  "$B/trellis-flexicubes-bench" --reps ${REPS:-10} 2>&1 | tee "$OUT/flexicubes_bench.md"
  rc=${PIPESTATUS[0]}
  echo "bench rc=$rc" | tee -a "$OUT/summary.txt"
  [[ $rc == 0 ]] || status=1
fi
if has tiny; then
  log "tiny preset: tiny.exe, FlexiCubes GPU vs CPU"
  "$B/trellis-mkmodel" --preset tiny --seed 1 --out /tmp/tiny --force --quiet
  pipeline tiny "$B/tiny.exe" /tmp/tiny 128
fi
if has large; then
  log "image-large, ${VOXELS:-20000} voxels: large.exe, FlexiCubes GPU vs CPU"
  ( time "$B/trellis-mkmodel" --preset image-large --seed 1 --out /tmp/large --force --quiet \
      --only slat_flow_model,slat_decoder_gs,slat_decoder_rf,slat_decoder_mesh ) 2>&1 | tail -3
  python3 "$ROOT/bench/slat_gpu/make_coords.py" --voxels ${VOXELS:-20000} --out /tmp/coords_large.npy
  pipeline large "$B/large.exe" /tmp/large 256 --coords /tmp/coords_large.npy
fi
if has memcheck; then
  log "memcheck: small built-in parity cases"
  CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  if [[ -x $CS ]]; then
    "$CS" --tool memcheck "$B/trellis-flexicubes-bench" --no-timing --max-cubes 120000 \
      > "$OUT/memcheck.log" 2>&1
    rc=$?
    echo "memcheck rc=$rc" | tee -a "$OUT/summary.txt"
    tail -4 "$OUT/memcheck.log" | tee -a "$OUT/summary.txt"
    # rc: the bench's own (1 on a parity failure); the ERROR SUMMARY line must say 0 errors.
    [[ $rc == 0 ]] || status=1
    grep -q "ERROR SUMMARY: 0 errors" "$OUT/memcheck.log" || status=1
  else
    echo "memcheck: compute-sanitizer not found" | tee -a "$OUT/summary.txt"
    status=1
  fi
fi
echo "run_device.sh: $([[ $status == 0 ]] && echo "all checks passed" || echo "a check FAILED") (exit $status)" \
  | tee -a "$OUT/summary.txt"
exit $status
