#!/usr/bin/env bash
# FP8 on Hopper, measured before it is built (bench/fp8/README.md):
#   profile  the fp16 program's per-op GPU time of both flow stages at image-large (trellis-ss-bench /
#            trellis-slat-bench --profile, eager launches): the GEMMs' share of each stage
#   gemm     cuBLASLt FP8 (E4M3, per-tensor scales) vs fp16 at the flow transformers' linear shapes, and the
#            activation's amax + quantize cost (build-gpu/fp8-gemm-bench, bench/fp8/gemm_bench.cu)
#   check    tiny, the fp8 program with --gpu-check-ops: every GPU op (the FP8 GEMMs included) against the CPU
#            reference's exact emulation; compute-sanitizer memcheck
#   gate     image-large, the fp16 and the fp8 programs on the same weights, cond and seed: stage 1 (own voxels),
#            stages 2-3 on the fp16 run's voxels; occupancy agreement, latent / Gaussian / RF rel L2, mesh counts
#            and Chamfer distance, stage times (last of 3 runs), weights staged (bench/fp8/compare.py)
# Needs build-gpu/ from bench/fp8/prepare.sh. Exit 1 when check fails (the gate's figures are reported, not
# asserted: they are the issue's questions).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B=$ROOT/build-gpu
OUT=${OUT:-$ROOT/out-gpu}
STEPS=${*:-check gate}
status=0
fail() { echo "FAIL: $*"; status=1; }
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
if has check; then
  T=/tmp/tiny
  [[ -f $T/cond.npy ]] || "$B/trellis-mkmodel" --preset tiny --seed 1 --out $T --force --quiet
  "$B/tiny_fp8.exe" --model $T --cond $T/cond.npy --seed 1 --gpu require --gpu-check-ops --steps-slat 2 \
    --out /tmp/f8_check > "$OUT/check.log" 2>&1 || fail "check: --gpu-check-ops on the fp8 program"
  grep -E "matched|error" "$OUT/check.log" | tail -4
  compute-sanitizer --tool memcheck --error-exitcode 1 "$B/tiny_fp8.exe" --model $T --cond $T/cond.npy --seed 1 \
    --gpu require --steps-ss 2 --steps-slat 2 --out /tmp/f8_mc > "$OUT/memcheck.log" 2>&1 || fail "memcheck"
  tail -1 "$OUT/memcheck.log"
fi
if has gate; then
  [[ -f $L/cond.npy ]] || "$B/trellis-mkmodel" --preset image-large --seed 1 --out $L --force --quiet
  for prog in large large_fp8; do
    "$B/$prog.exe" --model $L --cond $L/cond.npy --seed 1 --gpu require --stop-after ss --repeat 3 \
      --out /tmp/g_${prog}_ss > "$OUT/gate_${prog}_ss.log" 2>&1 || fail "gate: $prog stage 1"
  done
  cp /tmp/g_large_ss/coords.npy /tmp/g_coords.npy
  for prog in large large_fp8; do
    "$B/$prog.exe" --model $L --cond $L/cond.npy --seed 1 --gpu require --coords /tmp/g_coords.npy --repeat 3 \
      --out /tmp/g_${prog} > "$OUT/gate_${prog}.log" 2>&1 || fail "gate: $prog stages 2-3"
  done
  python3 "$ROOT/bench/fp8/compare.py" /tmp/g_large_ss /tmp/g_large_fp8_ss /tmp/g_large /tmp/g_large_fp8 \
    "$OUT"/gate_large_ss.log "$OUT"/gate_large_fp8_ss.log "$OUT"/gate_large.log "$OUT"/gate_large_fp8.log
fi
exit $status
