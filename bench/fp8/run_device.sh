#!/usr/bin/env bash
# FP8 on Hopper, measured before it is built (bench/fp8/README.md):
#   profile  the fp16 program's per-op GPU time of both flow stages at image-large (trellis-ss-bench /
#            trellis-slat-bench --profile, eager launches): the GEMMs' share of each stage
#   gemm     cuBLASLt FP8 (E4M3, per-tensor scales) vs fp16 at the flow transformers' linear shapes, and the
#            activation's amax + quantize cost (build-gpu/fp8-gemm-bench, bench/fp8/gemm_bench.cu)
# Timings only. Needs build-gpu/ (bench/ss_gpu/prepare.sh; fp8-gemm-bench built by bench/fp8/README.md's nvcc line).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B=$ROOT/build-gpu
OUT=${OUT:-$ROOT/out-gpu}
STEPS=${*:-profile gemm}
has() { [[ " $STEPS " == *" $1 "* ]]; }
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
nvidia-smi -L | tee "$OUT/device.txt"
L=/tmp/large
if has profile; then
  [[ -f $L/cond.npy ]] || "$B/trellis-mkmodel" --preset image-large --seed 1 --out $L --force --quiet
  python3 "$ROOT/bench/slat_gpu/make_coords.py" --voxels 20000 --out /tmp/fp8_surface.npy
  "$B/trellis-ss-bench" --exe "$B/large.exe" --model $L --reps 3 > "$OUT/ss_graphs.txt" 2>&1
  "$B/trellis-ss-bench" --exe "$B/large.exe" --model $L --reps 1 --profile > "$OUT/ss_profile.txt" 2>&1
  "$B/trellis-slat-bench" --exe "$B/large.exe" --model $L --coords /tmp/fp8_surface.npy --reps 3 > "$OUT/slat_graphs.txt" 2>&1
  "$B/trellis-slat-bench" --exe "$B/large.exe" --model $L --coords /tmp/fp8_surface.npy --reps 1 --profile \
    > "$OUT/slat_profile.txt" 2>&1
  for s in ss slat; do
    echo "== $s (graphs):"; grep -iE "median|GPU time" "$OUT/${s}_graphs.txt" | head -4
    echo "== $s profile:"; grep -E "^per-op|^\| [0-9]" "$OUT/${s}_profile.txt" | head -30
  done
fi
if has gemm; then
  # m n k per linear: SS (4096 tokens per branch) and SLat (~5.6k tokens at 20k voxels), width 1024, MLP 4096,
  # cond 1374 tokens.
  "$B/fp8-gemm-bench" \
    3072 4096 1024  1024 4096 1024  2048 1374 1024  4096 4096 1024  1024 4096 4096 \
    3072 4368 1024  1024 4368 1024  4096 4368 1024  1024 4368 4096 \
    3072 8192 1024  4096 8192 1024  1024 8192 4096 | tee "$OUT/gemm.txt"
  # The same shapes through PyTorch's cuBLASLt (torch._scaled_mm).
  python3 "$ROOT/bench/fp8/torch_fp8_gemm.py" \
    3072 4096 1024  1024 4096 1024  2048 1376 1024  4096 4096 1024  1024 4096 4096 \
    3072 4368 1024  1024 4368 1024  4096 4368 1024  1024 4368 4096 | tee "$OUT/torch_gemm.txt"
fi
