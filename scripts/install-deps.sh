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
  # HTTP server (tools/trellis-serve; header-only)
  libcpp-httplib-dev
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
    python3-pip python3-setuptools python3-venv
    # chromium: the headless browser of test/python/test_serve_browser.py (driven by puppeteer-core)
    chromium
    # slurm-wlm (slurmctld, slurmd, slurm-client: sbatch scancel squeue), munge (munged): the single-node
    # cluster of test/slurm/test_slurm_cluster.py (started by the test itself; no systemd needed)
    slurm-wlm munge)
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

# The trellis-serve web page's JavaScript packages (npm, pinned), part of the product:
# tools/trellis-serve/web/CMakeLists.txt copies their ES-module bundles into the build.
# With --test also puppeteer-core for the browser test (it drives Debian's chromium
# and never downloads a browser). 24.x: 25.x needs node >= 22, Debian 12 has 18.
# They go to build-deps/web/ in the repository (ignored by git). Needs node and npm.
WEB_PACKAGES=(
  @google/model-viewer@4.4.0
  three@0.183.2 # the version model-viewer 4.4.0 was built against (peer ^0.183.0)
  @mkkellogg/gaussian-splats-3d@0.4.7
)
if [[ "${1:-}" == "--test" ]]; then
  WEB_PACKAGES+=(puppeteer-core@24.43.1)
fi
WEB_PREFIX="$(cd "$(dirname "$0")/.." && pwd)/build-deps/web"
web_missing=()
for spec in "${WEB_PACKAGES[@]}"; do
  name="${spec%@*}" version="${spec##*@}"
  have=$(node -p "require('$WEB_PREFIX/node_modules/$name/package.json').version" 2>/dev/null || true)
  if [[ "$have" != "$version" ]]; then web_missing+=("$spec"); fi
done
if ((${#web_missing[@]} == 0)); then
  echo "install-deps: web packages present in $WEB_PREFIX"
elif command -v npm >/dev/null 2>&1; then
  echo "install-deps: installing ${web_missing[*]} into $WEB_PREFIX"
  mkdir -p "$WEB_PREFIX"
  PUPPETEER_SKIP_DOWNLOAD=1 npm install --prefix "$WEB_PREFIX" --no-audit --no-fund --save-exact \
    "${web_missing[@]}"
else
  echo "install-deps: note: npm not found; trellis-serve's web page (and its browser test) cannot be built" >&2
fi
