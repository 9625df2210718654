#!/usr/bin/env bash
# The project's main job: installs what is missing, builds, and runs.
#   ./scripts/run.sh [build-dir]
# What it runs today (the end-to-end pipeline is not built yet, see README):
# the compiler's --help, one example IR compiled through the phases that
# exist, and — when the synthetic-model tool is built — a tiny synthetic
# TRELLIS model written and validated.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}

./scripts/install-deps.sh
cmake -G Ninja -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD_DIR"
BIN="$BUILD_DIR/bin"

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "run: GPU found ($(nvidia-smi -L | head -1)); the GPU pipeline is not built yet, running the CPU path"
else
  echo "run: no GPU found; running the CPU path"
fi

echo "== trellisc --help =="
"$BIN/trellisc" --help
echo
echo "== trellisc docs/examples/mlp.mlir --compile-to=graph =="
"$BIN/trellisc" docs/examples/mlp.mlir --compile-to=graph

if [[ -x "$BIN/trellis-mkmodel" ]]; then
  echo
  echo "== trellis-mkmodel --preset tiny --seed 1 --out out/tiny =="
  mkdir -p out
  "$BIN/trellis-mkmodel" --preset tiny --seed 1 --out out/tiny --force
  ls -l out/tiny out/tiny/ckpts
fi
