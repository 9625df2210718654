#!/usr/bin/env bash
# The image path on a GPU machine (issue 26; bench/image_gpu/README.md). Needs build-gpu/ from
# bench/ss_gpu/prepare.sh then bench/image_gpu/prepare.sh (image.tar.xz: trellis-runtime and the bundles).
#   OUT=DIR bench/image_gpu/run_device.sh [STEP...]      (default: tiny multi large bench)
#     tiny    tiny preset, one image: image_stage on the GPU vs the CPU reference (tokens, the stage-1 latent),
#             --gpu-check-ops, compute-sanitizer memcheck of the image stage
#     multi   tiny preset, 3 conditions, stochastic and multidiffusion: the GPU samplers vs the CPU reference
#             (stage-1 latent, then stage 2 on the same voxels), and a 3-image --image run on the GPU
#     large   image-large (seed 1): the compiled image model's tokens vs the f32 PyTorch reference
#             (bench/pytorch/dinov2.py) on the same preprocessed image; --low-memory gives the same tokens
#     bench   image_stage time (trellis-ss-bench --function image_stage) and PyTorch eager / torch.compile of
#             the same model, same weights; then an image -> GLB generation, warm, on a 20k-voxel surface set
# Exit status 1 when a check misses its threshold (its "FAIL: ..." line says which); every step still runs.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B=$ROOT/build-gpu
OUT=${OUT:-$ROOT/out-gpu}
M=/tmp/image_gpu
mkdir -p "$OUT" "$M" "$B/image"
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
STEPS=${*:-tiny multi large bench}
has() { [[ " $STEPS " == *" $1 "* ]]; }
status=0
log() { echo "== $* ==" | tee -a "$OUT/summary.txt"; }
fail() { echo "FAIL: $*" | tee -a "$OUT/summary.txt"; status=1; }
check() { "$@" | tee -a "$OUT/summary.txt"; [[ ${PIPESTATUS[0]} == 0 ]] || status=1; }
run() { # run NAME CMD...: the command's output to $OUT/NAME.log; a non-zero exit is a failure
  "${@:2}" > "$OUT/$1.log" 2>&1 || fail "$1 exited $? (see $1.log: $(tail -1 "$OUT/$1.log"))"
}
COMPARE="python3 $ROOT/bench/image_gpu/compare.py"
TOKENS_MAX=${TOKENS_MAX:-2e-3} # issue 26: tokens vs an independent f32 forward, on the GPU
SAMPLER_MAX=${SAMPLER_MAX:-1e-3} # issue 26: multi-image GPU vs the CPU reference (tiny)
LATENT_MAX=${LATENT_MAX:-1e-2} # the stage-1 latent after GPU tokens (test/gpu/README.md, step tiny)

tar -C "$B/image" -xJf "$B/image.tar.xz"
RT=$B/image/trellis-runtime
nvidia-smi -L | tee "$OUT/device.txt"
images() { # images DIR NAME...: the RGBA test images of test/golden/image_cases.py as DIR/<name>.png
  python3 - "$ROOT/test/golden" "$@" <<'EOF'
import sys
sys.path.insert(0, sys.argv[1])
import image_cases as C
cases = C.cases()
for name in sys.argv[3:]:
    open(f"{sys.argv[2]}/{name}.png", "wb").write(C.png_bytes(cases[name][0]))
EOF
}
images "$M" a333x517_blob transparent_border downsample_1500x1100
IMG=$M/a333x517_blob.png

if has tiny || has multi; then
  "$B/trellis-mkmodel" --preset tiny --seed 1 --out "$M/tiny" --force --quiet
fi
if has tiny; then
  log "tiny: image_stage on the GPU vs the CPU reference"
  T=(--bundle "$B/image/tiny.bundle" --model "$M/tiny" --image "$IMG" --seed 1 --save-cond --stop-after ss)
  run tiny-gpu "$RT" "${T[@]}" --gpu require --out "$OUT/tiny-gpu"
  run tiny-cpu "$RT" "${T[@]}" --gpu off --out "$OUT/tiny-cpu"
  check $COMPARE tokens "$OUT/tiny-gpu/cond_tokens.npy" "$OUT/tiny-cpu/cond_tokens.npy" "$TOKENS_MAX" \
    "tiny tokens, GPU vs CPU reference"
  check $COMPARE arrays "$OUT/tiny-cpu" "$OUT/tiny-gpu" ss_latent.npy "$LATENT_MAX" "tiny stage 1 from the image"
  cmp -s "$OUT/tiny-gpu/cond_image.npy" "$OUT/tiny-cpu/cond_image.npy" || fail "tiny: cond_image.npy differs"
  # The PyTorch f32 reference of the large step, on the tiny weights: it must agree with the CPU reference
  # (itself checked against a NumPy float64 forward in CI) before it judges the GPU at image-large.
  run tiny-ref python3 "$ROOT/bench/pytorch/dinov2.py" --model-dir "$M/tiny/image_cond_model" \
    --image "$OUT/tiny-cpu/cond_image.npy" --out-tokens "$M/tiny_ref_tokens.npy"
  check $COMPARE tokens "$OUT/tiny-cpu/cond_tokens.npy" "$M/tiny_ref_tokens.npy" 1e-5 \
    "tiny tokens, CPU reference vs PyTorch f32"
  check $COMPARE tokens "$OUT/tiny-gpu/cond_tokens.npy" "$M/tiny_ref_tokens.npy" "$TOKENS_MAX" \
    "tiny tokens, GPU vs PyTorch f32"
  run tiny-check-ops "$RT" "${T[@]}" --gpu require --gpu-check-ops --steps-ss 1 --out "$OUT/tiny-check"
  run tiny-memcheck compute-sanitizer --tool memcheck --error-exitcode 1 \
    "$RT" "${T[@]}" --gpu require --steps-ss 1 --out "$OUT/tiny-memcheck"
  grep -q "ERROR SUMMARY: 0 errors" "$OUT/tiny-memcheck.log" || fail "tiny memcheck reported errors"
fi

if has multi; then
  log "multi: 3 conditions on the GPU vs the CPU reference"
  python3 -c "import numpy as np; np.save('$M/cond3.npy', np.random.default_rng(3).standard_normal((3, 1374, 128)).astype('float32'))"
  for mode in stochastic multidiffusion; do
    T=(--bundle "$B/image/tiny-$mode.bundle" --model "$M/tiny" --cond "$M/cond3.npy" --seed 2)
    run "multi-$mode-cpu" "$RT" "${T[@]}" --gpu off --stop-after ss --out "$OUT/multi-$mode-cpu"
    run "multi-$mode-gpu" "$RT" "${T[@]}" --gpu require --stop-after ss --out "$OUT/multi-$mode-gpu"
    check $COMPARE arrays "$OUT/multi-$mode-cpu" "$OUT/multi-$mode-gpu" ss_latent.npy "$SAMPLER_MAX" \
      "$mode stage 1, GPU vs CPU"
    # Stage 2 on the CPU run's voxels, both backends.
    C=(--coords "$OUT/multi-$mode-cpu/coords.npy" --stop-after slat)
    run "multi-$mode-cpu2" "$RT" "${T[@]}" "${C[@]}" --gpu off --out "$OUT/multi-$mode-cpu2"
    run "multi-$mode-gpu2" "$RT" "${T[@]}" "${C[@]}" --gpu require --out "$OUT/multi-$mode-gpu2"
    check $COMPARE arrays "$OUT/multi-$mode-cpu2" "$OUT/multi-$mode-gpu2" slat.npy "$SAMPLER_MAX" \
      "$mode stage 2, GPU vs CPU"
  done
  run multi-images "$RT" --bundle "$B/image/tiny-stochastic.bundle" --model "$M/tiny" --gpu require \
    --image "$IMG" --image "$M/transparent_border.png" --image "$M/downsample_1500x1100.png" --out "$OUT/multi-images"
  [[ -f $OUT/multi-images/mesh.glb ]] || fail "multi-images: no mesh.glb"
fi

if has large || has bench; then
  "$B/trellis-mkmodel" --preset image-large --seed 1 --out "$M/large" --force --quiet
fi
if has large; then
  log "large: image-large tokens vs the f32 PyTorch reference"
  run large-gpu "$RT" --bundle "$B/image/large.bundle" --model "$M/large" --image "$IMG" --gpu require \
    --save-cond --stop-after ss --steps-ss 1 --out "$OUT/large"
  run large-ref python3 "$ROOT/bench/pytorch/dinov2.py" --model-dir "$M/large/image_cond_model" \
    --image "$OUT/large/cond_image.npy" --out-tokens "$M/large_ref_tokens.npy"
  cat "$OUT/large-ref.log" | tee -a "$OUT/summary.txt"
  check $COMPARE tokens "$OUT/large/cond_tokens.npy" "$M/large_ref_tokens.npy" "$TOKENS_MAX" \
    "image-large tokens, GPU vs PyTorch f32"
  # --low-memory stages the image model like a stage (its weights released after it): the same tokens.
  run large-lowmem "$RT" --bundle "$B/image/large.bundle" --model "$M/large" --image "$IMG" --gpu require \
    --low-memory --save-cond --stop-after ss --steps-ss 1 --out "$OUT/large-lowmem"
  check $COMPARE tokens "$OUT/large-lowmem/cond_tokens.npy" "$OUT/large/cond_tokens.npy" 1e-6 \
    "image-large tokens, --low-memory vs resident"
fi

if has bench; then
  log "bench: image_stage, PyTorch, and an image -> GLB generation"
  run bench-ours "$B/trellis-ss-bench" --bundle "$B/image/large.bundle" --model "$M/large" \
    --function image_stage --reps 20
  run bench-profile "$B/trellis-ss-bench" --bundle "$B/image/large.bundle" --model "$M/large" \
    --function image_stage --reps 2 --profile
  run bench-torch python3 "$ROOT/bench/pytorch/dinov2.py" --model-dir "$M/large/image_cond_model" --bench --compile
  run bench-ours-again "$B/trellis-ss-bench" --bundle "$B/image/large.bundle" --model "$M/large" \
    --function image_stage --reps 20
  grep -h "median\|device" "$OUT/bench-ours.log" "$OUT/bench-ours-again.log" | tee -a "$OUT/summary.txt"
  grep -A8 "| PyTorch" "$OUT/bench-torch.log" | tee -a "$OUT/summary.txt"
  python3 "$ROOT/bench/slat_gpu/make_coords.py" --voxels 20000 --out "$M/surface.npy"
  E=(--bundle "$B/image/large.bundle" --model "$M/large" --coords "$M/surface.npy" --bench-stage1 --repeat 4)
  run e2e-image "$RT" "${E[@]}" --image "$IMG" --out "$OUT/e2e-image"
  run e2e-tokens "$RT" "${E[@]}" --cond "$M/large/cond.npy" --out "$OUT/e2e-tokens"
  for f in e2e-image e2e-tokens; do echo "-- $f"; grep -iE "generation|wall|GPU" "$OUT/$f.log" | tail -6; done |
    tee -a "$OUT/summary.txt"
  [[ -f $OUT/e2e-image/mesh.glb ]] || fail "e2e-image: no mesh.glb"
fi

if ((status)); then echo "bench/image_gpu/run_device.sh: FAILED" | tee -a "$OUT/summary.txt"; fi
exit $status
