#!/usr/bin/env bash
# Builds, here, what bench/fp8/run_device.sh carries: the standard build-gpu/ (bench/ss_gpu/prepare.sh), the
# fp8 programs of the tiny and image-large presets (tiny_fp8.exe, large_fp8.exe: trellisc --precision=fp8)
# the GEMM micro-benchmark (fp8-gemm-bench) and the FP8 attention's test and timing (fp8-attn-probe,
# bench/attention/fp8_probe.cu); the static-scale programs (trellisc --fp8-scales): tiny_fp8s.exe
# from a CPU calibration made here, large_fp8s.exe when build-gpu/fp8_scales_large.json (run_device.sh calibrate's
# $OUT/fp8_scales_large.json, fetched back) is there.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$ROOT/build}
G=$ROOT/build-gpu
bash "$ROOT/bench/ss_gpu/prepare.sh" "$BUILD"
"$BUILD/bin/trellisc" /tmp/tiny/pipeline.json --target=cuda --cond-tokens 21 --precision=fp8 -o "$G/tiny_fp8.exe"
"$BUILD/bin/trellisc" /tmp/large/pipeline.json --target=cuda --precision=fp8 -o "$G/large_fp8.exe"
T=/tmp/tiny
"$G/tiny_fp8.exe" --model $T --cond $T/cond.npy --seed 100 --calibrate 2 --gpu off --out "$G/tiny_calibration" \
  > "$G/tiny_calibration.log" 2>&1
"$BUILD/bin/trellisc" $T/pipeline.json --target=cuda --cond-tokens 21 --precision=fp8 \
  --fp8-scales "$G/tiny_calibration/fp8_scales.json" -o "$G/tiny_fp8s.exe"
LARGE_SCALES=$G/fp8_scales_large.json
if [[ -f $LARGE_SCALES ]]; then
  "$BUILD/bin/trellisc" /tmp/large/pipeline.json --target=cuda --precision=fp8 --fp8-scales "$LARGE_SCALES" \
    -o "$G/large_fp8s.exe"
fi
/usr/local/cuda/bin/nvcc -O3 -std=c++17 -arch=sm_90a -I"$ROOT" "$ROOT/bench/fp8/gemm_bench.cu" -lcublasLt -o "$G/fp8-gemm-bench"
/usr/local/cuda/bin/nvcc -O2 -std=c++17 -arch=sm_90a "$ROOT/bench/fp8/scale_modes_probe.cu" -lcublasLt \
  -o "$G/scale-modes-probe"
/usr/local/cuda/bin/nvcc -O3 -std=c++17 -arch=sm_90a -I"$ROOT" "$ROOT/bench/fp8/epilogue_probe.cu" -lcublasLt \
  -o "$G/epilogue-probe"
/usr/local/cuda/bin/nvcc -O3 -std=c++17 -arch=sm_90a -I"$ROOT" "$ROOT/bench/fp8/algo_search.cu" -lcublasLt \
  -o "$G/fp8-algo-search"
/usr/local/cuda/bin/nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I"$ROOT" \
  "$ROOT/bench/attention/fp8_probe.cu" -o "$G/fp8-attn-probe"
/usr/local/cuda/bin/nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I"$ROOT" \
  "$ROOT/bench/fp8/gemm_fp8_probe.cu" -lcublasLt -lcuda -o "$G/gemm-fp8-probe"
ls -la "$G"/tiny_fp8*.exe "$G"/large_fp8*.exe "$G"/fp8-gemm-bench "$G"/fp8-attn-probe
