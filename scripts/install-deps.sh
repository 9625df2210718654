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
  # Python (Debian's /usr/bin/python3; PyPI is not reachable)
  python3 python3-numpy python3-pytest
  # Fuzzing (libFuzzer from Debian's clang)
  clang-14 libclang-rt-14-dev
)
# Heavier packages only the tests need (open3d reads our PLY/GLB output).
if [[ "${1:-}" == "--test" ]]; then
  PACKAGES+=(python3-open3d)
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
