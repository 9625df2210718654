#!/usr/bin/env bash
# Runs every test suite against a build directory and prints one summary line
# "N passed, N failed" at the end (CI counts that line).
#   lit        test/lit      compiler IR tests (FileCheck, --verify-diagnostics)
#   gtest      build/unittests/*   C++ unit and golden tests
#   pytest     test/python   Python package and file-format tests
# GPU tests (label "gpu") never run here; see test/gpu/attention/README.md.
set -uo pipefail

BUILD_DIR=$(cd "${1:-build}" && pwd)
SRC_DIR=$(cd "$(dirname "$0")/.." && pwd)
RESULTS="$BUILD_DIR/test-results"
rm -rf "$RESULTS" && mkdir -p "$RESULTS"
export TRELLIS_BUILD_DIR="$BUILD_DIR"
PY=/usr/bin/python3
JOBS=$(nproc)

echo "== lit =="
/usr/lib/llvm-22/bin/lit -sv -j "$JOBS" --xunit-xml-output "$RESULTS/lit.xml" "$BUILD_DIR/test"

echo "== GoogleTest =="
for exe in "$BUILD_DIR"/unittests/*; do
  [[ -x "$exe" && -f "$exe" ]] || continue
  name=$(basename "$exe")
  echo "-- $name"
  "$exe" --gtest_brief=1 --gtest_output="xml:$RESULTS/gtest-$name.xml"
done

echo "== pytest =="
if compgen -G "$SRC_DIR/test/python/test_*.py" >/dev/null; then
  PYTHONPATH="$SRC_DIR/python${PYTHONPATH:+:$PYTHONPATH}" \
    "$PY" -m pytest -q -p no:cacheprovider --junitxml="$RESULTS/pytest.xml" "$SRC_DIR/test/python"
fi

"$PY" "$SRC_DIR/scripts/summarize-tests.py" "$RESULTS"
