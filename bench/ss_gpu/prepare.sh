#!/usr/bin/env bash
# Prepares build-gpu/ for bench/ss_gpu/run_device.sh on a GPU machine without the Debian toolchain:
# the runtime-side binaries, the two compiled pipelines, the shared libraries they link and the
# generated-kernel check's PTX + manifest (build-gpu/codegen, test/gpu/codegen/README.md).
#   bench/ss_gpu/prepare.sh [build-dir]      (default build; needs /tmp/tiny and /tmp/large, made
#                                             here with trellis-mkmodel if missing)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$ROOT/build}
G=$ROOT/build-gpu
mkdir -p "$G/lib"
[[ -f /tmp/tiny/pipeline.json ]] || "$BUILD/bin/trellis-mkmodel" --preset tiny --seed 1 --out /tmp/tiny --force --quiet
[[ -f /tmp/large/pipeline.json ]] || "$BUILD/bin/trellis-mkmodel" --preset image-large --seed 1 --out /tmp/large --force --quiet
cp "$BUILD/bin/trellis-mkmodel" "$BUILD/bin/trellis-ss-bench" "$BUILD/bin/trellis-slat-bench" \
  "$BUILD/bin/trellis-flexicubes-bench" "$G/"
"$BUILD/bin/trellisc" /tmp/tiny/pipeline.json --target=cuda --cond-tokens 21 -o "$G/tiny.exe"
"$BUILD/bin/trellisc" /tmp/large/pipeline.json --target=cuda -o "$G/large.exe"
python3 "$ROOT/test/gpu/codegen/gen_cases.py" --trellis-opt "$BUILD/bin/trellis-opt" --out "$G/codegen"
cp "$BUILD/lib/libtrellis_rt.so" "$G/lib/"  # the C ABI, for the launcher step
for lib in libzip.so.4 libtinygltf.so.2d libmeshoptimizer.so.2d libstb.so.0 libpng16.so.16 libjpeg.so.62; do
  cp -L "/lib/x86_64-linux-gnu/$lib" "$G/lib/"
done
du -sh "$G"
