#!/usr/bin/env bash
# The project's test command: installs what is missing (Debian packages),
# builds everything, and runs every test suite (lit, GoogleTest, pytest).
# Ends with one line "N passed, N failed". GPU tests never run here.
#   ./scripts/check.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}

./scripts/install-deps.sh --test
./scripts/check-format.sh
start=$(date +%s)
cmake -G Ninja -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DTRELLIS_WERROR=ON >/dev/null
cmake --build "$BUILD_DIR"
echo "check: build took $(( $(date +%s) - start )) s"
start=$(date +%s)
status=0
./scripts/run-tests.sh "$BUILD_DIR" || status=$?
echo "check: tests took $(( $(date +%s) - start )) s"
exit $status
