#!/usr/bin/env bash
# The SLat-stage check-and-measure run on a GPU machine, in one go (bench/slat_gpu/README.md).
# Needs build-gpu/ prepared by bench/ss_gpu/prepare.sh on the build machine (trellis-mkmodel,
# trellis-slat-bench, tiny.exe and large.exe compiled with --target=cuda, lib/).
# Writes everything under $OUT (default ./out-gpu). Steps can be picked:
#   run_device.sh tiny check check-gather memcheck full large profile torch   (default: tiny check large)
# Exits 1 when a step fails or a check misses its threshold (a "FAIL:" line in $OUT/summary.txt names it),
# after running every step asked for.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B=$ROOT/build-gpu
OUT=${OUT:-$ROOT/out-gpu}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
STEPS=${*:-tiny check large}
# Pass thresholds (relative L2), stated in README.md "Steps and pass conditions":
# TINY_MAX   GPU vs trellisc's CPU reference on the tiny preset, every output of the SLat stage and the decoders.
#            2e-3 is the bound test/python/test_pipeline_cuda_bundle.py puts on the CUDA bundle's SLat stage
#            against the CPU target; measured ≤ 8.6e-4 (BASELINE.md). The mesh coordinates must be identical.
# PARITY_MAX image-large against the fp32 PyTorch reference: one SLat-flow forward and the 25-step latent
#            (parity.py), every GS/RF field and the mesh fields (slat_decoders.py --compare-dir); 2e-3,
#            measured ≤ 1.35e-3 (BASELINE.md). The mesh coordinates must be identical.
TINY_MAX=${TINY_MAX:-2e-3}
PARITY_MAX=${PARITY_MAX:-2e-3}
status=0
log() { echo "== $* ==" | tee -a "$OUT/summary.txt"; }
fail() { echo "FAIL: $*" | tee -a "$OUT/summary.txt"; status=1; }
has() { [[ " $STEPS " == *" $1 "* ]]; }
nvidia-smi -L | tee "$OUT/device.txt"
compare() { # compare MAX CPU_DIR GPU_DIR NAME...: exits 1 if any output is over MAX, missing or of another shape
  python3 - "$@" <<'PY' | tee -a "$OUT/summary.txt"
import numpy as np, sys
mx, a, b = float(sys.argv[1]), sys.argv[2], sys.argv[3]
bad = 0
for name in sys.argv[4:]:
    try:
        x, y = np.load(f"{a}/{name}.npy").astype(np.float64), np.load(f"{b}/{name}.npy").astype(np.float64)
    except OSError as e:
        print(f"{name}: FAIL, {e}"); bad += 1; continue
    if x.shape != y.shape:
        print(f"{name}: FAIL, shapes differ {x.shape} vs {y.shape}"); bad += 1; continue
    rel = np.linalg.norm(x - y) / max(np.linalg.norm(x), 1e-30)
    ok = rel <= mx and np.isfinite(y).all()
    bad += not ok
    print(f"{name} {list(x.shape)}: GPU vs CPU reference rel L2 {rel:.3e}, max abs {np.abs(x - y).max():.3e}"
          + ("" if ok else f"  FAIL (> {mx:g} or not finite)"))
sys.exit(1 if bad else 0)
PY
}
TINY_OUTS="slat decode_gs_0 decode_gs_1 decode_gs_2 decode_gs_3 decode_gs_4 decode_rf_0 decode_rf_1 decode_rf_2 decode_mesh_1"

if has tiny || has check || has check-gather || has memcheck || has full; then
  M=/tmp/tiny
  "$B/trellis-mkmodel" --preset tiny --seed 1 --out $M --force --quiet || fail "trellis-mkmodel tiny"
  "$B/tiny.exe" --model $M --cond $M/cond.npy --out /tmp/tiny_ss --stop-after ss --seed 1 --gpu off > /dev/null 2>&1 \
    || fail "tiny.exe --stop-after ss (CPU) for the coordinates"
  cp /tmp/tiny_ss/coords.npy "$OUT/tiny_coords.npy"
fi
if has tiny; then
  log "tiny: SLat stage + decoders, GPU vs CPU reference (same coords, same noise)"
  "$B/trellis-slat-bench" --exe "$B/tiny.exe" --model /tmp/tiny --coords /tmp/tiny_ss/coords.npy --decoders \
    --cpu --out "$OUT/tiny_cpu" > "$OUT/tiny_cpu.log" 2>&1
  rc=$?; echo "cpu rc=$rc" | tee -a "$OUT/summary.txt"; [[ $rc == 0 ]] || fail "tiny: trellis-slat-bench --cpu"
  "$B/trellis-slat-bench" --exe "$B/tiny.exe" --model /tmp/tiny --coords /tmp/tiny_ss/coords.npy --decoders \
    --reps 2 --out "$OUT/tiny_gpu" > "$OUT/tiny_gpu.log" 2>&1
  rc=$?; echo "gpu rc=$rc" | tee -a "$OUT/summary.txt"; [[ $rc == 0 ]] || fail "tiny: trellis-slat-bench on the GPU"
  tail -8 "$OUT/tiny_gpu.log" | tee -a "$OUT/summary.txt"
  compare "$TINY_MAX" "$OUT/tiny_cpu" "$OUT/tiny_gpu" $TINY_OUTS || fail "tiny: GPU vs CPU rel L2 over $TINY_MAX"
  compare 0 "$OUT/tiny_cpu" "$OUT/tiny_gpu" decode_mesh_0 || fail "tiny: mesh coordinates (decode_mesh_0) not identical"
fi
if has check; then
  log "tiny: every GPU op of the SLat stage and decoders against the CPU reference (--gpu-check-ops)"
  "$B/tiny.exe" --model /tmp/tiny --cond /tmp/tiny/cond.npy --out "$OUT/tiny_check" --seed 1 --gpu require \
    --gpu-check-ops --steps-slat 2 > "$OUT/tiny_check.log" 2>&1
  rc=$?; echo "rc=$rc" | tee -a "$OUT/summary.txt"; grep -E "error|checked|worst" "$OUT/tiny_check.log" | tail -5 | tee -a "$OUT/summary.txt"
  [[ $rc == 0 ]] || fail "check: --gpu-check-ops exited $rc (an op or view differs from the CPU reference)"
fi
if has check-gather; then
  log "tiny: --gpu-check-ops with every 3x3x3 conv on the generated gather / tap sum (TRELLIS_SPARSE_CONV=gather)"
  TRELLIS_SPARSE_CONV=gather "$B/tiny.exe" --model /tmp/tiny --cond /tmp/tiny/cond.npy --out "$OUT/tiny_check_gather" \
    --seed 1 --gpu require --gpu-check-ops --steps-slat 2 > "$OUT/tiny_check_gather.log" 2>&1
  rc=$?; echo "rc=$rc" | tee -a "$OUT/summary.txt"; grep -E "error|checked|worst" "$OUT/tiny_check_gather.log" | tail -5 | tee -a "$OUT/summary.txt"
  [[ $rc == 0 ]] || fail "check-gather: --gpu-check-ops exited $rc"
fi
if has full; then
  log "tiny: the whole pipeline on the GPU (trellis.exe --gpu require)"
  "$B/tiny.exe" --model /tmp/tiny --cond /tmp/tiny/cond.npy --out "$OUT/tiny_full" --seed 1 --gpu require \
    > "$OUT/tiny_full.log" 2>&1
  rc=$?; echo "rc=$rc" | tee -a "$OUT/summary.txt"; tail -6 "$OUT/tiny_full.log" | tee -a "$OUT/summary.txt"
  [[ $rc == 0 ]] || fail "full: tiny.exe --gpu require exited $rc"
fi
if has memcheck; then
  log "tiny: compute-sanitizer memcheck of the SLat stage and decoders"
  /usr/local/cuda/bin/compute-sanitizer --tool memcheck --print-limit 20 "$B/trellis-slat-bench" \
    --exe "$B/tiny.exe" --model /tmp/tiny --coords /tmp/tiny_ss/coords.npy --decoders --reps 1 \
    > "$OUT/memcheck.log" 2>&1
  rc=$?; echo "rc=$rc" | tee -a "$OUT/summary.txt"; grep -E "ERROR SUMMARY" "$OUT/memcheck.log" | tee -a "$OUT/summary.txt"
  # Pass: the run exits 0 and the sanitizer reports "ERROR SUMMARY: 0 errors".
  [[ $rc == 0 ]] && grep -q "ERROR SUMMARY: 0 errors" "$OUT/memcheck.log" || fail "memcheck: rc=$rc or errors reported"
fi

if has large || has torch || has profile; then
  M=/tmp/large
  ( time "$B/trellis-mkmodel" --preset image-large --seed 1 --out $M --force --quiet \
      --only slat_flow_model,slat_decoder_gs,slat_decoder_rf,slat_decoder_mesh ) 2>&1 | tail -3
  [[ ${PIPESTATUS[0]} == 0 ]] || fail "trellis-mkmodel image-large"
  python3 "$ROOT/bench/slat_gpu/make_coords.py" --voxels ${VOXELS:-20000} --out /tmp/coords_large.npy
  python3 -c "import numpy as np; np.save('/tmp/slat_noise.npy', np.random.default_rng(7).standard_normal((${VOXELS:-20000}, 8)).astype('float32'))"
fi
if has large; then
  log "image-large: trellisc SLat stage and decoders, ${VOXELS:-20000} voxels"
  "$B/trellis-slat-bench" --exe "$B/large.exe" --model /tmp/large --coords /tmp/coords_large.npy \
    --noise /tmp/slat_noise.npy --decoders --reps ${REPS:-3} --out "$OUT/large" --json "$OUT/trellis.json" 2>&1 | tee "$OUT/large.log" \
    | tail -9 | tee -a "$OUT/summary.txt"
  [[ ${PIPESTATUS[0]} == 0 ]] || fail "large: trellis-slat-bench (SLat stage and decoders)"
  log "image-large: one SLat-flow forward (1 step, cfg 0) for parity"
  "$B/trellis-slat-bench" --exe "$B/large.exe" --model /tmp/large --coords /tmp/coords_large.npy \
    --noise /tmp/slat_noise.npy --reps 0 --steps 1 --cfg 0 --out "$OUT/large_1step" > "$OUT/large_1step.log" 2>&1
  rc=$?; echo "rc=$rc" | tee -a "$OUT/summary.txt"; [[ $rc == 0 ]] || fail "large: the 1-step run"
  # The decoders' outputs under bench/pytorch/slat_decoders.py --compare-dir's names, on the local disk
  # (they are large); the 25-step latent stays with the results.
  mkdir -p /tmp/large_dec
  i=0; for f in xyz features_dc scaling rotation opacity; do mv "$OUT/large/decode_gs_$i.npy" /tmp/large_dec/gs_$f.npy; i=$((i+1)); done
  i=0; for f in trivec density features_dc; do mv "$OUT/large/decode_rf_$i.npy" /tmp/large_dec/rf_$f.npy; i=$((i+1)); done
  mv "$OUT/large/decode_mesh_0.npy" /tmp/large_dec/mesh_coords.npy   # int32 [64N,4] at 256³
  mv "$OUT/large/decode_mesh_1.npy" /tmp/large_dec/mesh_fields.npy   # f32 [64N,101] (≈0.5 GB at N=20k)
  rm -f "$OUT"/large/decode_*.npy
fi
if has torch; then
  # Needs the large step's outputs ($OUT/large, $OUT/large_1step, /tmp/large_dec) from this call or an earlier one.
  log "image-large: PyTorch parity (fp32) and eager / torch.compile timing of the same math"
  python3 "$ROOT/bench/slat_gpu/parity.py" --model /tmp/large --coords /tmp/coords_large.npy \
    --cond /tmp/large/cond.npy --noise /tmp/slat_noise.npy --latent1 "$OUT/large_1step/slat.npy" \
    --full-latent "$OUT/large/slat.npy" --json "$OUT/parity.json" 2>&1 | tail -6 | tee -a "$OUT/summary.txt"
  [[ ${PIPESTATUS[0]} == 0 ]] || fail "torch: parity.py"
  python3 "$ROOT/bench/pytorch/slat_decoders.py" --model /tmp/large --coords /tmp/coords_large.npy \
    --slat "$OUT/large/slat.npy" --heads gs,rf,mesh --precision fp32 --mode eager --reps 1 \
    --compare-dir /tmp/large_dec --json "$OUT/decoder_parity.json" 2>&1 | grep compare | tee -a "$OUT/summary.txt"
  [[ ${PIPESTATUS[0]} == 0 ]] || fail "torch: slat_decoders.py --compare-dir"
  # The parity threshold (PARITY_MAX) on both JSON files; a missing file or entry fails too.
  python3 - "$PARITY_MAX" "$OUT/parity.json" "$OUT/decoder_parity.json" <<'PY' | tee -a "$OUT/summary.txt"
import json, sys
mx, bad = float(sys.argv[1]), []
try:
    p = json.load(open(sys.argv[2]))
    d = json.load(open(sys.argv[3])).get("compare", {})
except (OSError, ValueError) as e:
    print(f"parity: FAIL, {e}"); sys.exit(1)
vals = {k: p.get(k) for k in ("forward_rel_l2", "full_latent_rel_l2")}
vals.update({k: d.get(k) for k in ("gs_xyz", "gs_features_dc", "gs_scaling", "gs_rotation", "gs_opacity",
                                   "rf_trivec", "rf_density", "rf_features_dc", "mesh_fields")})
for k, v in vals.items():
    if v is None or not v <= mx:
        bad.append(f"{k} {v}")
if d.get("mesh_coords_identical") is not True:
    bad.append(f"mesh_coords_identical {d.get('mesh_coords_identical')}")
worst = max((v for v in vals.values() if v is not None), default=float("nan"))
print(f"parity vs fp32 PyTorch: worst rel L2 {worst:.3e} (threshold {mx:g})"
      + (": FAIL " + ", ".join(bad) if bad else ", mesh coordinates identical"))
sys.exit(1 if bad else 0)
PY
  [[ ${PIPESTATUS[0]} == 0 ]] || fail "torch: parity vs fp32 PyTorch over $PARITY_MAX (or missing)"
  python3 "$ROOT/bench/pytorch/slat_stage.py" --model /tmp/large --coords /tmp/coords_large.npy \
    --cond /tmp/large/cond.npy --mode both --precision fp16 --json "$OUT/torch.json" 2>&1 \
    | grep -v "^autotune\|^  triton" > "$OUT/torch.txt"
  [[ ${PIPESTATUS[0]} == 0 ]] || fail "torch: slat_stage.py timing"
  tail -14 "$OUT/torch.txt" | tee -a "$OUT/summary.txt"
  python3 "$ROOT/bench/pytorch/slat_decoders.py" --model /tmp/large --coords /tmp/coords_large.npy \
    --slat "$OUT/large/slat.npy" --heads gs,rf,mesh --precision fp16 --mode both --json "$OUT/torch_decoders.json" \
    2>&1 | grep -v "^autotune\|^  triton" > "$OUT/torch_decoders.txt"
  [[ ${PIPESTATUS[0]} == 0 ]] || fail "torch: slat_decoders.py timing"
  tail -15 "$OUT/torch_decoders.txt" | tee -a "$OUT/summary.txt"
fi
if has profile; then
  log "image-large: per-op GPU time of the SLat stage (eager launches, events per command)"
  "$B/trellis-slat-bench" --exe "$B/large.exe" --model /tmp/large --coords /tmp/coords_large.npy \
    --noise /tmp/slat_noise.npy --reps 1 --profile > "$OUT/profile.txt" 2>&1 || fail "profile: trellis-slat-bench --profile"
  grep -E "^\s+\|" "$OUT/profile.txt" | head -40 | tee -a "$OUT/summary.txt"
fi
if has torch && [[ -f "$OUT/trellis.json" ]]; then
  log "image-large: trellisc against PyTorch (one table)"
  python3 "$ROOT/bench/slat_gpu/report.py" --trellis "$OUT/trellis.json" --torch-stage "$OUT/torch.json" \
    --torch-decoders "$OUT/torch_decoders.json" 2>&1 | tee -a "$OUT/summary.txt"
  [[ ${PIPESTATUS[0]} == 0 ]] || fail "report.py"
fi
[[ $status == 0 ]] && echo "run_device.sh: all steps passed ($STEPS)" | tee -a "$OUT/summary.txt" \
  || echo "run_device.sh: FAILED, see the FAIL lines above ($STEPS)" | tee -a "$OUT/summary.txt"
exit $status
