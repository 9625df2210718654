#!/usr/bin/env bash
# Builds, here, what bench/fp8/run_device.sh carries: the standard build-gpu/ (bench/ss_gpu/prepare.sh), the
# fp8 programs of the tiny and image-large presets (tiny_fp8.exe, large_fp8.exe: trellisc --precision=fp8)
# and the GEMM micro-benchmark (fp8-gemm-bench).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$ROOT/build}
G=$ROOT/build-gpu
bash "$ROOT/bench/ss_gpu/prepare.sh" "$BUILD"
"$BUILD/bin/trellisc" /tmp/tiny/pipeline.json --target=cuda --cond-tokens 21 --precision=fp8 -o "$G/tiny_fp8.exe"
"$BUILD/bin/trellisc" /tmp/large/pipeline.json --target=cuda --precision=fp8 -o "$G/large_fp8.exe"
/usr/local/cuda/bin/nvcc -O3 -std=c++17 -arch=sm_90a -I"$ROOT" "$ROOT/bench/fp8/gemm_bench.cu" -lcublasLt -o "$G/fp8-gemm-bench"
ls -la "$G"/tiny_fp8.exe "$G"/large_fp8.exe "$G"/fp8-gemm-bench
