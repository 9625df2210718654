#!/usr/bin/env bash
# A/B of the two sparse-conv paths on one GPU machine (needs build-gpu/ from bench/ss_gpu/prepare.sh):
# the implicit-GEMM conv (default on sm_90 for the narrow convs) against TRELLIS_SPARSE_CONV=gather (every
# 3x3x3 conv through the generated neighbour gather / taps-first tap sum + cuBLASLt), same voxels and noise:
# stage times, outputs compared, the mesh decoder per-op profile. Results on stdout.
#   OUT=$OUT bash bench/slat_gpu/conv_ab.sh     (SKIP_TINY=1 skips the tiny check; MODES="default gather")
set -u
export LD_LIBRARY_PATH=$PWD/build-gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
B=build-gpu
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
if [ -z "${SKIP_TINY:-}" ]; then
  bash bench/slat_gpu/run_device.sh tiny check > $OUT/tiny.log 2>&1 || echo "run_device.sh tiny check: FAILED"
  grep -E "rel L2|matched|rc=|FAIL" $OUT/summary.txt | tail -16
fi
M=/tmp/large
$B/trellis-mkmodel --preset image-large --seed 1 --out $M --force --quiet --only slat_flow_model,slat_decoder_gs,slat_decoder_rf,slat_decoder_mesh
python3 bench/slat_gpu/make_coords.py --voxels 20000 --out /tmp/c.npy
python3 -c "import numpy as np; np.save('/tmp/n.npy', np.random.default_rng(7).standard_normal((20000, 8)).astype('float32'))"
for mode in ${MODES:-default gather}; do
  if [ $mode = default ]; then unset TRELLIS_SPARSE_CONV; else export TRELLIS_SPARSE_CONV=$mode; fi
  echo "== $mode"
  $B/trellis-slat-bench --exe $B/large.exe --model $M --coords /tmp/c.npy --noise /tmp/n.npy --decoders --reps 3 --out /tmp/o_$mode 2>&1 | grep -E "^\| (slat|decode)"
done
unset TRELLIS_SPARSE_CONV
python3 - <<'PY'
import numpy as np
for n in ["slat", "decode_mesh_1", "decode_gs_0", "decode_mesh_0"]:
    a=np.load(f"/tmp/o_default/{n}.npy").astype(np.float64); b=np.load(f"/tmp/o_gather/{n}.npy").astype(np.float64)
    print(n, a.shape, "default vs gather rel L2 %.3e max abs %.3e" % (np.linalg.norm(a-b)/np.linalg.norm(b), np.abs(a-b).max()))
PY
$B/trellis-slat-bench --exe $B/large.exe --model $M --coords /tmp/c.npy --decoders --reps 1 --steps 1 --profile 2>&1 | grep -A8 "decode_mesh on" | head -10
