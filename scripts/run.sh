#!/usr/bin/env bash
# The project's main job: installs what is missing, builds, and runs the
# TRELLIS pipeline end to end.
#   ./scripts/run.sh [build-dir]
# The executable runs stage 1 (sparse structure) on the GPU when there is one
# and everything else on the CPU reference backend (all of it on the CPU when
# there is no GPU). Without a real model directory it uses the `tiny`
# synthetic model.
#   MODEL=models/TRELLIS-image-large ./scripts/run.sh   # a real release
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}

./scripts/install-deps.sh
cmake -G Ninja -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD_DIR"
BIN="$BUILD_DIR/bin"

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "run: GPU found ($(nvidia-smi -L | head -1)): stage 1 runs on it"
else
  echo "run: no GPU found: the executable falls back to the CPU reference backend"
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

# The default target is cuda; a trellisc built without the CUDA toolkit can
# only target the CPU.
TARGET=cuda
if ! "$BIN/trellisc" "$MODEL/pipeline.json" "${COND_TOKENS[@]}" -o out/trellis.exe 2>out/trellisc.log; then
  if grep -q "built without the attention kernels" out/trellisc.log; then
    TARGET=cpu
  else
    cat out/trellisc.log >&2
    exit 1
  fi
fi
echo "== trellisc $MODEL/pipeline.json --target=$TARGET -o out/trellis.exe =="
"$BIN/trellisc" "$MODEL/pipeline.json" --target=$TARGET "${COND_TOKENS[@]}" -o out/trellis.exe
echo "== out/trellis.exe --model $MODEL --cond $MODEL/cond.npy --out out/result =="
time out/trellis.exe --model "$MODEL" --cond "$MODEL/cond.npy" --out out/result --seed 1
ls -l out/result
