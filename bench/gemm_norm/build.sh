#!/usr/bin/env bash
# Builds the fused GEMM + residual + LayerNorm kernel's bench/check harness into
# build-gemm/ (or $1). Needs the CUDA toolkit (nvcc, cuda.h, the libcuda stub,
# cuBLAS), no GPU. Run on the device: build-gemm/gemm_norm_bench [reps] [diag].
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${1:-$ROOT/build-gemm}
CUDA=${CUDA_HOME:-/usr/local/cuda}
mkdir -p "$OUT"
"$CUDA/bin/nvcc" -std=c++17 -O3 -I"$ROOT" -lineinfo -gencode=arch=compute_90a,code=sm_90a \
  -Xptxas -v -o "$OUT/gemm_norm_bench" "$ROOT/bench/gemm_norm/gemm_norm_bench.cu" \
  -L"$CUDA/lib64/stubs" -lcuda -lcublas >"$OUT/ptxas.log" 2>&1 || {
  cat "$OUT/ptxas.log" >&2
  exit 1
}
grep -A2 "trellis_gemm_norm_sm90" "$OUT/ptxas.log" | grep -E "registers|spill" || true
echo "built $OUT/gemm_norm_bench"
