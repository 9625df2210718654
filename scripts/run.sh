#!/usr/bin/env bash
# The project's main job: installs what is missing, builds, and runs the
# TRELLIS pipeline end to end.
#   ./scripts/run.sh [build-dir]
# Today the compiled pipeline runs on the CPU reference backend (the GPU
# backend is not built yet; on a GPU machine this says so and runs on the
# CPU). Without a real model directory it uses the `tiny` synthetic model.
#   MODEL=models/TRELLIS-image-large ./scripts/run.sh   # a real release
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}

./scripts/install-deps.sh
cmake -G Ninja -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD_DIR"
BIN="$BUILD_DIR/bin"

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "run: GPU found ($(nvidia-smi -L | head -1)), but the GPU backend is not built yet: running on the CPU"
else
  echo "run: no GPU found: running the CPU reference backend"
fi

mkdir -p out
MODEL=${MODEL:-}
COND_TOKENS=()
if [[ -z "$MODEL" ]]; then
  MODEL=out/tiny-model
  echo "== trellis-mkmodel --preset tiny --seed 1 --out $MODEL =="
  "$BIN/trellis-mkmodel" --preset tiny --seed 1 --out "$MODEL" --force --quiet
  COND_TOKENS=(--cond-tokens 21) # the tiny preset's cond.npy is [1, 21, 128]
fi

echo "== trellisc $MODEL/pipeline.json --target=cpu -o out/trellis.exe =="
"$BIN/trellisc" "$MODEL/pipeline.json" --target=cpu "${COND_TOKENS[@]}" -o out/trellis.exe
echo "== out/trellis.exe --model $MODEL --cond $MODEL/cond.npy --out out/result =="
time out/trellis.exe --model "$MODEL" --cond "$MODEL/cond.npy" --out out/result --seed 1
ls -l out/result
