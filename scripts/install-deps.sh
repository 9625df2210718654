#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks to build and test trellisc.
# Idempotent: packages already present are skipped, so a second run costs a few seconds.
# The CUDA 13 toolkit is expected at /usr/local/cuda (preinstalled, not handled here).
set -euo pipefail

PACKAGES=(
  # Build
  cmake ninja-build g++ pkg-config
  # LLVM/MLIR 22 (shared libLLVM/libMLIR, mlir-tblgen) and lit/FileCheck
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools
  # C++ libraries
  nlohmann-json3-dev libgtest-dev libgmock-dev zlib1g-dev libzip-dev
  libtinygltf-dev libmeshoptimizer-dev
  # Image decoding (runtime/image)
  libpng-dev libjpeg62-turbo-dev
  # Python (Debian's /usr/bin/python3; PyPI is not reachable)
  python3 python3-numpy python3-pytest
  # Fuzzing (libFuzzer from Debian's clang)
  clang-14 libclang-rt-14-dev
)
# Heavier packages only the tests need (open3d reads our PLY/GLB output).
if [[ "${1:-}" == "--test" ]]; then
  # open3d: the mesh checks; pil: Pillow, the image preprocessing cross-check;
  # clang-format-14, black, codespell: scripts/check-format.sh
  # pip, setuptools, venv: `pip install ./python` offline (test/python/test_installed_package.py)
  PACKAGES+=(python3-open3d python3-pil clang-format-14 black codespell
    python3-pip python3-setuptools python3-venv)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "install-deps: all ${#PACKAGES[@]} packages present"
fi

if [[ ! -x /usr/local/cuda/bin/nvcc ]]; then
  echo "install-deps: note: no CUDA toolkit at /usr/local/cuda; the GPU backend will not be built" >&2
fi

# Khronos glTF validator (npm package, pinned) for the GLB interop tests
# (test/python/test_output_mesh.py). It goes to build-deps/node/ in the
# repository (ignored by git); the tests look there, or in
# $TRELLIS_GLTF_VALIDATOR_DIR (a node_modules directory). Needs node and npm.
if [[ "${1:-}" == "--test" ]]; then
  GLTF_VALIDATOR_VERSION=2.0.0-dev.3.10
  NODE_PREFIX="$(cd "$(dirname "$0")/.." && pwd)/build-deps/node"
  have=$(node -p "require('$NODE_PREFIX/node_modules/gltf-validator/package.json').version" 2>/dev/null || true)
  if [[ "$have" == "$GLTF_VALIDATOR_VERSION" ]]; then
    echo "install-deps: gltf-validator $have present in $NODE_PREFIX"
  elif command -v npm >/dev/null 2>&1; then
    echo "install-deps: installing gltf-validator@$GLTF_VALIDATOR_VERSION into $NODE_PREFIX"
    mkdir -p "$NODE_PREFIX"
    npm install --prefix "$NODE_PREFIX" --no-audit --no-fund --save-exact \
      "gltf-validator@$GLTF_VALIDATOR_VERSION"
  else
    echo "install-deps: note: npm not found; the GLB validation tests will be skipped" >&2
  fi
fi
