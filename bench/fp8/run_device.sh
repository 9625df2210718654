#!/usr/bin/env bash
# FP8 on Hopper, measured before it is built (bench/fp8/README.md):
#   profile  the fp16 program's per-op GPU time of both flow stages at image-large (trellis-ss-bench /
#            trellis-slat-bench --profile, eager launches): the GEMMs' share of each stage
#   gemm     cuBLASLt FP8 (E4M3, per-tensor scales) vs fp16 at the flow transformers' linear shapes, and the
#            activation's amax + quantize cost (build-gpu/fp8-gemm-bench, bench/fp8/gemm_bench.cu); the epilogues'
#            cost with every heuristic candidate timed (build-gpu/epilogue-probe); every configuration of every
#            FP8 algorithm cuBLASLt lists against its heuristic's best (build-gpu/fp8-algo-search); a first FP8
#            GEMM of our own against cuBLASLt (build-gpu/gemm-fp8-probe)
#   check    the FP8 attention kernel alone (build-gpu/fp8-attn-probe: fp32 reference, redone tiles, times);
#            the fused layer norms' E4M3 variants (test/gpu/codegen/check_kernels.py, bytes exact); tiny, the fp8 program with --gpu-check-ops: every GPU op (the FP8 GEMMs and attention included)
#            against the CPU reference's exact emulation; compute-sanitizer memcheck
#   check    (also) calibration on the GPU vs the CPU; the static-scale program (tiny_fp8s.exe) op by op, under
#            memcheck, and whole (fused E4M3 outputs) against its CPU reference run
#   calibrate  image-large: large_fp8.exe --calibrate 4 (seeds 100..103) -> $OUT/fp8_scales_large.json, from
#            which prepare.sh (run again, here) compiles large_fp8s.exe
#   gate     image-large, the fp16 program and each fp8 one (dynamic; static when large_fp8s.exe exists) on the
#            same weights, cond and seed: stage 1 (own voxels, 5 runs), stages 2-3 on the fp16 run's voxels (3),
#            stage 2 on the 20k-voxel surface (5); occupancy agreement, latent / Gaussian / RF rel L2, mesh counts
#            and Chamfer distance, stage GPU times (median of the runs after the first), weights staged
#            (bench/fp8/compare.py); the control: stage 1 of the fp16 program on its portable kernels against
#            the native run (how far random weights' occupancy moves at fp16's own rounding differences)
#   series   stage 1 only, the fp16 and the static-scale fp8 program alternately (SERIES_ROUNDS rounds, default
#            4; --repeat 5 each, the median of runs 2..5 as the gate takes it): the SS ratio per round, to see
#            one card's spread
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
# The image-large model: FP8_MODEL (a real checkpoint's directory, with its conditioning in cond.npy), else
# random weights made here (trellis-mkmodel --seed 1).
L=${FP8_MODEL:-/tmp/large}
large_model() {
  [[ -f $L/cond.npy ]] && return
  if [[ -n ${FP8_MODEL:-} ]]; then
    echo "FP8_MODEL=$FP8_MODEL has no cond.npy (the conditioning tokens the gate runs on)" >&2
    exit 2
  fi
  "$B/trellis-mkmodel" --preset image-large --seed 1 --out $L --force --quiet
}
if has profile; then
  # Per program (PROFILE_PROGRAMS, default "large"; e.g. "large large_fp8s"): graph timings and the eager
  # per-op profile of both flow stages.
  large_model
  python3 "$ROOT/bench/slat_gpu/make_coords.py" --voxels 20000 --out /tmp/fp8_surface.npy
  for prog in ${PROFILE_PROGRAMS:-large}; do
    "$B/trellis-ss-bench" --exe "$B/$prog.exe" --model $L --reps 3 > /tmp/${prog}_ss_graphs.txt 2>&1
    "$B/trellis-ss-bench" --exe "$B/$prog.exe" --model $L --reps 1 --profile > /tmp/${prog}_ss_profile.txt 2>&1
    "$B/trellis-slat-bench" --exe "$B/$prog.exe" --model $L --coords /tmp/fp8_surface.npy --reps 3 \
      > /tmp/${prog}_slat_graphs.txt 2>&1
    "$B/trellis-slat-bench" --exe "$B/$prog.exe" --model $L --coords /tmp/fp8_surface.npy --reps 1 --profile \
      > /tmp/${prog}_slat_profile.txt 2>&1
    for s in ss slat; do
      echo "== $prog $s (graphs):"; grep -iE "median|GPU time|^\| (ss|slat)_stage" /tmp/${prog}_${s}_graphs.txt | head -4
      echo "== $prog $s profile:"; grep -E "^per-op|^\| [0-9]" /tmp/${prog}_${s}_profile.txt | head -30
    done | tee -a "$OUT/profile.txt"
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
  # The epilogues' cost and every heuristic candidate: SS fc1, SLat fc1, qkv.
  for shape in "4096 4096 1024" "4096 4368 1024" "3072 4096 1024"; do
    # shellcheck disable=SC2086
    "$B/epilogue-probe" $shape
  done | tee "$OUT/epilogue.txt"
  # Every configuration cuBLASLt lists against its heuristic's best: SS fc1 as the static program runs it
  # (GELU + bias, E4M3 D), the 1024-wide linears, qkv, fc2.
  for case in "4096 4096 1024 gelu_bias_e4m3" "1024 4096 1024 bias" "3072 4096 1024 bias" "1024 4096 4096 bias"; do
    # shellcheck disable=SC2086
    "$B/fp8-algo-search" $case
  done | tee "$OUT/algo_search.txt"
  # A first FP8 GEMM of our own (TMA + wgmma, bench/fp8/sm90_fp8_gemm.cuh) against cuBLASLt, SS shapes.
  "$B/gemm-fp8-probe" | tee "$OUT/own_gemm.txt" || fail "gemm: our FP8 GEMM's results"
fi
if has check; then
  # The FP8 attention kernel alone against an fp32 reference and the fp16 kernels (exit 1 past its bounds).
  "$B/fp8-attn-probe" --iters 20 > "$OUT/attn_probe.log" 2>&1 || fail "check: the FP8 attention probe"
  grep -E "^==|rel L2|redone|with pre-pass" "$OUT/attn_probe.log"
  # The fused layer norms' E4M3 variants (what a static-scale FP8 GEMM reads): exactly the f16 kernel's result
  # quantized, and the norm kernels themselves against the reference (test/gpu/codegen/check_kernels.py).
  python3 "$ROOT/test/gpu/codegen/check_kernels.py" --dir "$B/codegen" --only norm --reps 5 \
    > "$OUT/kernels_norm.log" 2>&1 || fail "check: the norm kernels and their E4M3 variants"
  grep -E "e4m3|kernels," "$OUT/kernels_norm.log"
  T=/tmp/tiny
  [[ -f $T/cond.npy ]] || "$B/trellis-mkmodel" --preset tiny --seed 1 --out $T --force --quiet
  "$B/tiny_fp8.exe" --model $T --cond $T/cond.npy --seed 1 --gpu require --gpu-check-ops --steps-slat 2 \
    --out /tmp/f8_check > "$OUT/check.log" 2>&1 || fail "check: --gpu-check-ops on the fp8 program"
  grep -E "matched|error" "$OUT/check.log" | tail -4
  compute-sanitizer --tool memcheck --error-exitcode 1 "$B/tiny_fp8.exe" --model $T --cond $T/cond.npy --seed 1 \
    --gpu require --steps-ss 2 --steps-slat 2 --out /tmp/f8_mc > "$OUT/memcheck.log" 2>&1 || fail "memcheck"
  tail -1 "$OUT/memcheck.log"
  # Calibration on the GPU against the CPU reference's, same seeds, stage 2 on fixed voxels (--bench-stage1: the
  # backends' stage 1 may differ by a few voxels); the amax of f16 activations that the two backends compute in
  # different orders: close, not equal.
  for mode in require off; do
    "$B/tiny_fp8.exe" --model $T --cond $T/cond.npy --seed 100 --calibrate 2 --gpu $mode \
      --coords /tmp/f8_check/coords.npy --bench-stage1 --out /tmp/f8_cal_$mode > "$OUT/calibrate_tiny_$mode.log" \
      2>&1 || fail "check: calibration, --gpu $mode"
  done
  python3 - /tmp/f8_cal_require/fp8_scales.json /tmp/f8_cal_off/fp8_scales.json <<'PY' || fail "check: calibrations differ"
import json, sys
files = [json.load(open(p)) for p in sys.argv[1:3]]
g, c = (f["amax"] for f in files)
assert g.keys() == c.keys(), "different linears"
worst = max(abs(g[k] - c[k]) / c[k] for k in c)
gv, cv = (f.get("v_amax", {}) for f in files)
assert gv.keys() == cv.keys(), "different attention ops"
worst_v = max((abs(a - b) / b for k in cv for a, b in zip(gv[k], cv[k])), default=0.0)
print(f"calibration: {len(c)} linears, GPU vs CPU amax worst relative difference {worst:.2e}; "
      f"{len(cv)} attention ops, v amax per head {worst_v:.2e}")
sys.exit(0 if worst < 2e-2 and worst_v < 2e-2 else 1)
PY
  # The static-scale program (tiny_fp8s.exe, compiled with the CPU calibration of prepare.sh): every op against
  # the CPU reference (the fused E4M3 outputs are off while checking), memcheck, and a whole run with the fusion
  # against the CPU reference's run of the same program.
  "$B/tiny_fp8s.exe" --model $T --cond $T/cond.npy --seed 1 --gpu require --gpu-check-ops --steps-slat 2 \
    --out /tmp/f8s_check > "$OUT/check_static.log" 2>&1 || fail "check: --gpu-check-ops on the static fp8 program"
  grep -E "matched|error" "$OUT/check_static.log" | tail -2
  compute-sanitizer --tool memcheck --error-exitcode 1 "$B/tiny_fp8s.exe" --model $T --cond $T/cond.npy --seed 1 \
    --gpu require --steps-ss 2 --steps-slat 2 --out /tmp/f8s_mc > "$OUT/memcheck_static.log" 2>&1 ||
    fail "memcheck (static)"
  tail -1 "$OUT/memcheck_static.log"
  for mode in require off; do
    "$B/tiny_fp8s.exe" --model $T --cond $T/cond.npy --seed 1 --gpu $mode --stop-after slat \
      --out /tmp/f8s_$mode > "$OUT/static_$mode.log" 2>&1 || fail "check: static program, --gpu $mode"
  done
  python3 - /tmp/f8s_require /tmp/f8s_off <<'PY' || fail "check: the static program's GPU run vs its CPU run"
import sys
import numpy as np
g, c = sys.argv[1:3]
def rel(a, b):
    return float(np.linalg.norm(a.astype(np.float64) - b) / np.linalg.norm(b.astype(np.float64)))
cg, cc = np.load(f"{g}/coords.npy"), np.load(f"{c}/coords.npy")
e = rel(np.load(f"{g}/ss_latent.npy"), np.load(f"{c}/ss_latent.npy"))
print(f"static fp8, GPU (fused E4M3 outputs) vs CPU reference: ss_latent rel L2 {e:.2e}, voxels {len(cg)} / {len(cc)}")
ok = e < 2e-2
if len(cg) == len(cc) and (cg == cc).all():
    s = rel(np.load(f"{g}/slat.npy"), np.load(f"{c}/slat.npy"))
    print(f"  slat rel L2 {s:.2e}")
    ok &= s < 2e-2
sys.exit(0 if ok else 1)
PY
fi
if has calibrate; then
  # image-large: the static scales of the gate's static program, from seeds 100..103 (the gate runs seed 1).
  large_model
  "$B/large_fp8.exe" --model $L --cond $L/cond.npy --seed 100 --calibrate 4 --gpu require --out /tmp/f8_cal_large \
    > "$OUT/calibrate_large.log" 2>&1 || fail "calibrate: image-large"
  tail -2 "$OUT/calibrate_large.log"
  cp /tmp/f8_cal_large/fp8_scales.json "$OUT/fp8_scales_large.json"
fi
if has gate; then
  large_model
  python3 "$ROOT/bench/slat_gpu/make_coords.py" --voxels 20000 --out /tmp/fp8_surface.npy
  progs="large large_fp8"
  [[ -x $B/large_fp8s.exe ]] && progs="$progs large_fp8s"
  for prog in $progs; do
    D=/tmp/g_$prog
    rm -rf $D && mkdir -p $D
    "$B/$prog.exe" --model $L --cond $L/cond.npy --seed 1 --gpu require --stop-after ss --repeat 5 \
      --out $D/ss > $D/ss.log 2>&1 || fail "gate: $prog stage 1"
    [[ $prog == large ]] && cp $D/ss/coords.npy /tmp/g_coords.npy
    "$B/$prog.exe" --model $L --cond $L/cond.npy --seed 1 --gpu require --coords /tmp/g_coords.npy --repeat 3 \
      --out $D/full > $D/full.log 2>&1 || fail "gate: $prog stages 2-3"
    "$B/$prog.exe" --model $L --cond $L/cond.npy --seed 1 --gpu require --coords /tmp/fp8_surface.npy \
      --stop-after slat --repeat 5 --out $D/surface > $D/surface.log 2>&1 || fail "gate: $prog on the surface"
    for l in ss full surface; do cp $D/$l.log "$OUT/gate_${prog}_$l.log"; done
  done
  # The control: stage 1 of the fp16 program again on its portable kernels (--gpu-arch portable: the sm_75
  # code, other summation orders, the same fp16 math), to see how far these random weights' occupancy moves
  # for a latent difference of fp16's own size.
  D=/tmp/g_portable
  rm -rf $D && mkdir -p $D
  "$B/large.exe" --model $L --cond $L/cond.npy --seed 1 --gpu require --gpu-arch portable --stop-after ss \
    --out $D/ss > $D/ss.log 2>&1 || fail "gate: large --gpu-arch portable stage 1"
  for prog in $progs; do
    [[ $prog == large ]] || python3 "$ROOT/bench/fp8/compare.py" /tmp/g_large /tmp/g_$prog
  done
  python3 "$ROOT/bench/fp8/compare.py" /tmp/g_large $D --ss-only
fi
if has series; then
  large_model
  [[ -x $B/large_fp8s.exe ]] || { echo "series needs large_fp8s.exe (calibrate, then prepare.sh)" >&2; exit 2; }
  # The median of runs 2..5 of a log's stage 1.
  ss_median_ms() {
    python3 - "$1" <<'PY'
import re, statistics, sys
t = [float(x) for x in re.findall(r"^\[1/3 [^]]*\] done in [0-9.e-]+ s on the GPU \(([0-9.e-]+) s of GPU time",
                                  open(sys.argv[1]).read(), re.M)]
print(f"{statistics.median(t[1:]) * 1e3:.1f}")
PY
  }
  for r in $(seq 1 "${SERIES_ROUNDS:-4}"); do
    for prog in large large_fp8s; do
      "$B/$prog.exe" --model $L --cond $L/cond.npy --seed 1 --gpu require --stop-after ss --repeat 5 \
        --out /tmp/series_$prog > /tmp/series_$prog.log 2>&1 || fail "series: $prog stage 1"
    done
    a=$(ss_median_ms /tmp/series_large.log) b=$(ss_median_ms /tmp/series_large_fp8s.log)
    echo "round $r: SS stage fp16 $a ms, fp8 static $b ms, $(python3 -c "print(f'{$a / $b:.3f}')")x"
  done > >(tee "$OUT/series.txt")
fi
exit $status
