#!/usr/bin/env bash
# Builds the attention kernels and their harnesses into build-attn/ (or $1). Needs the CUDA
# toolkit (nvcc, ptxas, cuda.h, the libcuda stub), no GPU. The CMake build compiles the kernel images that
# trellisc embeds itself (runtime/kernels/CMakeLists.txt); this script adds the standalone harnesses.
#   build-attn/attention_sm90a.cubin   wgmma kernels, sm_90a      (TRELLIS_ATTN_SM90_CONFIGS)
#   build-attn/attention_sm80.ptx      mma.sync kernels, compute_80 (TRELLIS_ATTN_SM80_CONFIGS)
#   build-attn/attention_sm75.ptx      mma.sync kernels, compute_75 (TRELLIS_ATTN_SM75_CONFIGS)
#   build-attn/libtattn.so             C ABI for bench.py (driver-API loader/launcher)
#   build-attn/attn_test               GPU correctness test (test/gpu/attention)
#   build-attn/ptxas_*.log             register / spill / wgmma-serialization reports
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${1:-$ROOT/build-attn}
CUDA=${CUDA_HOME:-/usr/local/cuda}
NVCC=${NVCC:-$CUDA/bin/nvcc}
PTXAS=${PTXAS:-$CUDA/bin/ptxas}
CXX=${CXX:-g++}
K=$ROOT/runtime/kernels
mkdir -p "$OUT"
NVFLAGS=(-std=c++17 -O3 -I"$ROOT" -Xptxas -v --resource-usage)

pids=()
"$NVCC" "${NVFLAGS[@]}" -lineinfo -cubin -gencode=arch=compute_90a,code=sm_90a \
  -o "$OUT/attention_sm90a.cubin" "$K/attention_sm90a.cu" >"$OUT/ptxas_sm90a.log" 2>&1 & pids+=($!)
( "$NVCC" -std=c++17 -O3 -I"$ROOT" -ptx -arch=compute_80 -o "$OUT/attention_sm80.ptx" "$K/attention_sm80.cu" &&
  "$PTXAS" -arch=sm_80 -v -o /dev/null "$OUT/attention_sm80.ptx" >"$OUT/ptxas_sm80.log" 2>&1 &&
  "$PTXAS" -arch=sm_90 -v -o /dev/null "$OUT/attention_sm80.ptx" >"$OUT/ptxas_sm80_on_sm90.log" 2>&1 ) & pids+=($!)
( "$NVCC" -std=c++17 -O3 -I"$ROOT" -ptx -arch=compute_75 -DTRELLIS_ATTN_TARGET_SM75 -o "$OUT/attention_sm75.ptx" \
    "$K/attention_sm80.cu" &&
  "$PTXAS" -arch=sm_75 -v -o /dev/null "$OUT/attention_sm75.ptx" >"$OUT/ptxas_sm75.log" 2>&1 ) & pids+=($!)
"$CXX" -std=c++17 -O2 -Wall -fPIC -shared -I"$ROOT" -I"$CUDA/include" -o "$OUT/libtattn.so" \
  "$ROOT/bench/attention/attn_capi.cpp" -L"$CUDA/lib64/stubs" -lcuda & pids+=($!)
"$CXX" -std=c++17 -O2 -Wall -I"$ROOT" -I"$CUDA/include" -o "$OUT/attn_test" \
  "$ROOT/test/gpu/attention/attn_test.cpp" -L"$CUDA/lib64/stubs" -lcuda & pids+=($!)
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
if [[ $rc != 0 ]]; then
  cat "$OUT"/ptxas_*.log >&2 || true
  echo "build failed" >&2
  exit 1
fi
# wgmma kernels must not be serialized by ptxas, nor spill
if grep -E "C7510|C7512|C7514|C7515" "$OUT/ptxas_sm90a.log"; then
  echo "warning: ptxas serialized wgmma in some kernel (see $OUT/ptxas_sm90a.log)" >&2
fi
grep -E "Compiling entry|registers|spill" "$OUT/ptxas_sm90a.log" | paste - - - |
  sed -E 's/ptxas info *: //g; s/Compiling entry function//; s/for .sm_90a.//' || true
echo "built into $OUT"
