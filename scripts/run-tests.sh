#!/usr/bin/env bash
# Runs every test suite against a build directory and prints one summary line
# "N passed, N failed" at the end (CI counts that line).
#   lit        test/lit      compiler IR tests (FileCheck, --verify-diagnostics)
#   gtest      build/unittests/*   C++ unit and golden tests
#   pytest     test/python   Python package and file-format tests
#   slurm      test/slurm    a single-node Slurm cluster running a job array
#   fuzz       test/fuzz     each libFuzzer target ~20 s (scripts/fuzz.sh --smoke)
# GPU tests (label "gpu") never run here; see test/gpu/attention/README.md.
set -uo pipefail

BUILD_DIR=$(cd "${1:-build}" && pwd)
SRC_DIR=$(cd "$(dirname "$0")/.." && pwd)
RESULTS="$BUILD_DIR/test-results"
export TRELLIS_TEST_RESULTS=$RESULTS # artifacts (the browser test's screenshot)
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

echo "== Slurm (a single-node cluster) =="
# test/slurm: a real slurmctld + slurmd from Debian's packages (install-deps.sh
# --test), a job array over a manifest on the tiny preset, cancel and resume.
PYTHONPATH="$SRC_DIR/python${PYTHONPATH:+:$PYTHONPATH}" \
  "$PY" -m pytest -q -p no:cacheprovider --junitxml="$RESULTS/pytest-slurm.xml" "$SRC_DIR/test/slurm"

echo "== fuzz (smoke) =="
# Each libFuzzer target for a short budget from its seeds (scripts/fuzz.sh
# --smoke; clang-14 and libclang-rt-14-dev come from install-deps.sh). A
# crash is a failed test case. TRELLIS_FUZZ_SMOKE=0 skips it (local runs).
if [[ "${TRELLIS_FUZZ_SMOKE:-1}" == 0 ]]; then
  echo "skipped (TRELLIS_FUZZ_SMOKE=0)"
elif ! command -v "${FUZZ_CXX:-clang++-14}" >/dev/null; then
  echo "skipped: ${FUZZ_CXX:-clang++-14} not found (scripts/install-deps.sh installs it)"
  printf '<testsuite name="fuzz-smoke"><testcase classname="fuzz" name="smoke"><skipped message="no clang"/></testcase></testsuite>\n' \
    >"$RESULTS/fuzz.xml"
else
  if ! "$SRC_DIR/scripts/fuzz.sh" --smoke --junit "$RESULTS/fuzz.xml" &&
    [[ ! -f "$RESULTS/fuzz.xml" ]]; then
    echo "broken XML: fuzz.sh failed without a report" >"$RESULTS/fuzz.xml" # counts as a failure
  fi
fi

"$PY" "$SRC_DIR/scripts/summarize-tests.py" "$RESULTS"
