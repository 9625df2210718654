#!/usr/bin/env bash
# Builds the benchmark tools that need only the CUDA toolkit into build-gpu/ (or $1):
#   libkernel_trace.so   CUPTI kernel trace (kernel_trace.cpp: CUDA_INJECTION64_PATH=...)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${1:-$ROOT/build-gpu}
CUDA=${CUDA_HOME:-/usr/local/cuda}
CUPTI_LIB=$(dirname "$(ls "$CUDA"/lib/libcupti.so "$CUDA"/lib64/libcupti.so "$CUDA"/extras/CUPTI/lib64/libcupti.so 2>/dev/null | head -1)")
mkdir -p "$OUT"
g++ -std=c++17 -O2 -Wall -fPIC -shared -I"$CUDA/include" -I"$CUDA/targets/x86_64-linux/include" \
  -o "$OUT/libkernel_trace.so" "$ROOT/bench/tools/kernel_trace.cpp" \
  -L"$CUPTI_LIB" -lcupti -Wl,-rpath,"$CUPTI_LIB" -Wl,-rpath,"$CUDA/lib64" -Wl,-rpath,"$CUDA/extras/CUPTI/lib64"
echo "built $OUT/libkernel_trace.so"
