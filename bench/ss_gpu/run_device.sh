#!/usr/bin/env bash
# The issue-5 check-and-measure run on a GPU machine, in one go (bench/ss_gpu/README.md).
# Needs build-gpu/ prepared by bench/ss_gpu/prepare.sh on the build machine:
#   trellis-mkmodel, trellis-ss-bench, tiny.exe and large.exe (trellisc --target=cuda), lib/ (the
#   Debian shared libraries the runtime links, for a machine without them), codegen/ (the generated
#   kernels' PTX and case manifest, test/gpu/codegen/gen_cases.py).
# Writes everything under $OUT (default ./out-gpu). Steps can be picked: run_device.sh tiny large bench
# (default: tiny memcheck kernels large bench).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B=$ROOT/build-gpu
OUT=${OUT:-$ROOT/out-gpu}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
STEPS=${*:-tiny memcheck kernels large bench}
log() { echo "== $* ==" | tee -a "$OUT/summary.txt"; }
has() { [[ " $STEPS " == *" $1 "* ]]; }
nvidia-smi -L | tee "$OUT/device.txt"

noise() { # noise FILE SHAPE...
  python3 -c "import numpy as np,sys; np.save(sys.argv[1], np.random.default_rng(7).standard_normal([int(a) for a in sys.argv[2:]]).astype('float32'))" "$@"
}
large_model() { # the image-large SS models (seed 1) in /tmp/large
  "$B/trellis-mkmodel" --preset image-large --seed 1 --out /tmp/large --force --quiet \
    --only sparse_structure_flow_model,sparse_structure_decoder
}
compare() { # compare CPU_DIR GPU_DIR
  python3 - "$1" "$2" <<'EOF' | tee -a "$OUT/summary.txt"
import numpy as np, sys
a, b = sys.argv[1], sys.argv[2]
la, lb = np.load(a + "/ss_latent.npy"), np.load(b + "/ss_latent.npy")
ca, cb = np.load(a + "/coords.npy"), np.load(b + "/coords.npy")
rel = np.linalg.norm(la - lb) / np.linalg.norm(la)
sa, sb = set(map(tuple, ca)), set(map(tuple, cb))
print(f"latent rel L2 (GPU vs CPU reference) {rel:.3e}; voxels cpu {len(sa)} gpu {len(sb)}; "
      f"identical {len(sa & sb)}; differing {len(sa ^ sb)}")
EOF
}

if has tiny; then
  log "tiny: GPU vs CPU reference"
  M=/tmp/tiny
  "$B/trellis-mkmodel" --preset tiny --seed 1 --out $M --force --quiet
  noise /tmp/tiny_noise.npy 1 8 8 8 8
  common=(--model $M --cond $M/cond.npy --ss-noise /tmp/tiny_noise.npy --stop-after ss)
  "$B/tiny.exe" "${common[@]}" --out "$OUT/tiny_cpu" --gpu off > "$OUT/tiny_cpu.log" 2>&1
  "$B/tiny.exe" "${common[@]}" --out "$OUT/tiny_gpu" --gpu require > "$OUT/tiny_gpu.log" 2>&1
  echo "rc=$?"; tail -4 "$OUT/tiny_gpu.log" | tee -a "$OUT/summary.txt"
  compare "$OUT/tiny_cpu" "$OUT/tiny_gpu"
  log "tiny: every GPU op against the CPU reference (--gpu-check-ops)"
  "$B/tiny.exe" "${common[@]}" --out "$OUT/tiny_check" --gpu require --gpu-check-ops \
    > "$OUT/tiny_check.log" 2>&1
  echo "rc=$?"; tail -3 "$OUT/tiny_check.log" | tee -a "$OUT/summary.txt"
  log "tiny: full pipeline (GPU stage 1, CPU stages 2-3)"
  "$B/tiny.exe" --model $M --cond $M/cond.npy --out "$OUT/tiny_full" --seed 1 > "$OUT/tiny_full.log" 2>&1
  echo "rc=$?" | tee -a "$OUT/summary.txt"; ls "$OUT/tiny_full" | tr '\n' ' ' | tee -a "$OUT/summary.txt"; echo
  log "tiny: parity against the PyTorch fp32 reference"
  "$B/tiny.exe" "${common[@]}" --out "$OUT/tiny_1step" --gpu require --steps-ss 1 --cfg-ss 0 \
    > "$OUT/tiny_1step.log" 2>&1
  python3 "$ROOT/bench/ss_gpu/parity.py" --model $M --cond $M/cond.npy --noise /tmp/tiny_noise.npy \
    --latent1 "$OUT/tiny_1step/ss_latent.npy" --coords1 "$OUT/tiny_1step/coords.npy" \
    --full-latent "$OUT/tiny_gpu/ss_latent.npy" --full-coords "$OUT/tiny_gpu/coords.npy" \
    --json "$OUT/tiny_parity.json" 2>&1 | tee -a "$OUT/summary.txt"
fi

if has capi; then
  log "tiny: the C ABI (python/examples/run_trellis.py over libtrellis_rt.so) vs trellis.exe, both on the GPU"
  M=/tmp/tiny
  "$B/trellis-mkmodel" --preset tiny --seed 1 --out $M --force --quiet
  for run in a b; do
    "$B/tiny.exe" --model $M --cond $M/cond.npy --out "$OUT/exe_$run" --seed 1 --gpu require \
      > "$OUT/exe_$run.log" 2>&1; echo "trellis.exe rc=$?" | tee -a "$OUT/summary.txt"
  done
  TRELLISC_BUILD_DIR=$B python3 "$ROOT/python/examples/run_trellis.py" --program "$B/tiny.exe" --model $M \
    --cond $M/cond.npy --out "$OUT/capi" --seed 1 > "$OUT/capi.log" 2>&1
  echo "launcher rc=$?" | tee -a "$OUT/summary.txt"; tail -3 "$OUT/capi.log" | tee -a "$OUT/summary.txt"
  python3 - "$OUT" <<'EOF2' | tee -a "$OUT/summary.txt"
import numpy as np, sys
o = sys.argv[1]
for name in ["ss_latent.npy", "coords.npy", "slat.npy"]:
    a, b, c = (np.load(f"{o}/{d}/{name}") for d in ("exe_a", "exe_b", "capi"))
    print(f"{name}: exe run 1 == run 2: {np.array_equal(a, b)}; C ABI == exe: {np.array_equal(a, c)}")
EOF2
fi

if has faults; then
  log "tiny: an asynchronous GPU fault (injected into the first gated_residual kernel) is reported with its op"
  M=/tmp/tiny
  for mode in "" "--gpu-sync-ops"; do
    TRELLIS_GPU_INJECT_FAULT=trellis.gated_residual "$B/tiny.exe" --model $M --cond $M/cond.npy \
      --stop-after ss --out "$OUT/fault" --gpu require $mode > "$OUT/fault$mode.log" 2>&1
    echo "rc=$? $mode" | tee -a "$OUT/summary.txt"; grep "error" "$OUT/fault$mode.log" | tee -a "$OUT/summary.txt"
    ls "$OUT/fault" 2>/dev/null | tee -a "$OUT/summary.txt"
  done
fi

if has memcheck; then
  log "tiny: compute-sanitizer memcheck (graphs on, then eager)"
  M=/tmp/tiny
  for g in "" "--no-cuda-graphs"; do
    /usr/local/cuda/bin/compute-sanitizer --tool memcheck --print-limit 20 \
      "$B/tiny.exe" --model $M --cond $M/cond.npy --ss-noise /tmp/tiny_noise.npy --stop-after ss \
      --out "$OUT/tiny_memcheck" --gpu require $g > "$OUT/memcheck$g.log" 2>&1
    echo "rc=$? $g" | tee -a "$OUT/summary.txt"; grep -E "ERROR SUMMARY" "$OUT/memcheck$g.log" | tee -a "$OUT/summary.txt"
  done
fi

if has kernels; then
  log "generated kernels: every family against the reference math, bandwidth"
  python3 "$ROOT/test/gpu/codegen/check_kernels.py" --dir "$B/codegen" --json "$OUT/kernels.json" \
    > "$OUT/kernels.txt" 2>&1
  echo "rc=$?" | tee -a "$OUT/summary.txt"
  grep -E "^BAD|layer_norm|gated_residual|kernels," "$OUT/kernels.txt" | tee -a "$OUT/summary.txt"
fi

if has large; then
  log "image-large: weights (SS models only)"
  M=/tmp/large
  ( time large_model ) 2>&1 | tail -3
  noise /tmp/large_noise.npy 1 8 16 16 16
  common=(--model $M --cond $M/cond.npy --ss-noise /tmp/large_noise.npy --stop-after ss --gpu require)
  log "image-large: one SS-flow forward + decoder vs PyTorch fp32"
  "$B/large.exe" "${common[@]}" --out "$OUT/large_1step" --steps-ss 1 --cfg-ss 0 > "$OUT/large_1step.log" 2>&1
  echo "rc=$?"; tail -3 "$OUT/large_1step.log" | tee -a "$OUT/summary.txt"
  "$B/large.exe" "${common[@]}" --out "$OUT/large_full" > "$OUT/large_full.log" 2>&1
  echo "rc=$?"; tail -3 "$OUT/large_full.log" | tee -a "$OUT/summary.txt"
  python3 "$ROOT/bench/ss_gpu/parity.py" --model $M --cond $M/cond.npy --noise /tmp/large_noise.npy \
    --latent1 "$OUT/large_1step/ss_latent.npy" --coords1 "$OUT/large_1step/coords.npy" \
    --full-latent "$OUT/large_full/ss_latent.npy" --full-coords "$OUT/large_full/coords.npy" \
    --json "$OUT/large_parity.json" 2>&1 | tee -a "$OUT/summary.txt"
fi

if has bench; then
  M=/tmp/large
  [[ -f $M/pipeline.json ]] || large_model
  log "image-large: trellisc SS stage timing"
  "$B/trellis-ss-bench" --exe "$B/large.exe" --model $M --reps 5 2>&1 | tee "$OUT/bench_trellis.txt" | tee -a "$OUT/summary.txt"
  # Same math, same GPU, and the same weights and cond as trellisc: at the H100's power cap the speed
  # depends on the values, so the baseline on its own random weights is printed too.
  log "image-large: PyTorch eager and torch.compile on the model's weights and cond"
  python3 "$ROOT/bench/pytorch/ss_stage.py" --mode both --model $M 2>&1 | grep -v "^autotune\|^  triton" \
    > "$OUT/bench_pytorch_model.txt"; tail -14 "$OUT/bench_pytorch_model.txt" | tee -a "$OUT/summary.txt"
  log "image-large: PyTorch eager and torch.compile on random weights"
  python3 "$ROOT/bench/pytorch/ss_stage.py" --mode both 2>&1 | grep -v "^autotune\|^  triton" \
    > "$OUT/bench_pytorch.txt"; tail -14 "$OUT/bench_pytorch.txt" | tee -a "$OUT/summary.txt"
  log "image-large: trellisc SS stage timing, again after the baselines"
  "$B/trellis-ss-bench" --exe "$B/large.exe" --model $M --reps 5 2>&1 | tee "$OUT/bench_trellis_2.txt" | tail -9 | tee -a "$OUT/summary.txt"
fi
