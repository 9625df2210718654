#!/usr/bin/env bash
# Adds the image path's programs to build-gpu/ (after bench/ss_gpu/prepare.sh, which puts trellis-mkmodel,
# trellis-ss-bench and the shared libraries there): build-gpu/image.tar.xz with the bare runtime
# (trellis-runtime) and five CUDA bundles, compressed to fit the device call's carry limit.
#   bench/image_gpu/prepare.sh [build-dir]     (default build)
# Bundles: tiny.bundle (tiny preset with its image-conditioning model, one image), tiny-stochastic.bundle and
# tiny-multidiffusion.bundle (--images 3), large.bundle (image-large with the real-size image model).
# The models are made here with trellis-mkmodel (seed 1) in /tmp/image_gpu; the GPU machine makes the same.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$ROOT/build}
G=$ROOT/build-gpu
M=/tmp/image_gpu
[[ -x $G/trellis-mkmodel ]] || { echo "run bench/ss_gpu/prepare.sh first" >&2; exit 1; }
mkdir -p "$M" "$G"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkmodel() { "$BUILD/bin/trellis-mkmodel" --seed 1 --force --quiet "$@"; }
[[ -f $M/tiny/image_cond_model/model.safetensors ]] || mkmodel --preset tiny --out "$M/tiny"
# image-large: only the checkpoint headers matter to trellisc, but the writer makes whole files (4.2 GB).
[[ -f $M/large/image_cond_model/model.safetensors ]] || mkmodel --preset image-large --out "$M/large"
tc() { "$BUILD/bin/trellisc" "$@" --target=cuda --emit=bundle; }
tc "$M/tiny/pipeline.json" -o "$stage/tiny.bundle"
for mode in stochastic multidiffusion; do
  tc "$M/tiny/pipeline.json" --images 3 --multi-image "$mode" -o "$stage/tiny-$mode.bundle"
done
tc "$M/large/pipeline.json" -o "$stage/large.bundle"
cp "$BUILD/bin/trellis-runtime" "$stage/"
tar -C "$stage" -cJf "$G/image.tar.xz" .
cp "$BUILD/bin/trellis-ss-bench" "$G/"  # --function image_stage
ls -la "$G/image.tar.xz"
du -sh "$G"
