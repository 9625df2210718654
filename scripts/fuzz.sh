#!/usr/bin/env bash
# Builds the libFuzzer targets with clang++-14 (outside CMake, into
# build-fuzz/) and runs each for a bounded time.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]      (default: 60, all)
#   FUZZ_BUILD_ONLY=1 scripts/fuzz.sh                     (build, do not run)
#   scripts/fuzz.sh --smoke [--junit FILE] [TARGET...]    (CI, see below)
#
# --smoke: the short budget scripts/run-tests.sh runs in CI: each target for
# $FUZZ_SMOKE_SECONDS (default 20) from its seeds and regressions, with a
# fresh scratch corpus (build-fuzz/smoke/NAME/, so runs do not depend on
# earlier ones); --junit FILE writes one JUnit test case per target (a crash,
# leak, timeout or OOM, or a failed build, is a failure).
#
# A target NAME is test/fuzz/NAME.cpp or test/fuzz/NAME_fuzzer.cpp (written
# with TRELLIS_FUZZ_TARGET, see test/fuzz/FuzzTarget.h), seeded from
# test/fuzz/corpus/NAME/ and test/fuzz/regressions/NAME/, with
# test/fuzz/dicts/NAME.dict if present.
# New inputs go to build-fuzz/corpus/NAME/ (kept between runs). Every crash,
# leak, timeout or OOM is copied to test/fuzz/regressions/NAME/ (commit it;
# GoogleTest replays it) and makes the script exit 1.
#
# Adding a target is one line in TARGETS below.
set -uo pipefail

SRC=$(cd "$(dirname "$0")/.." && pwd)
OUT="$SRC/build-fuzz"
SMOKE=""
JUNIT=""
if [[ "${1:-}" == "--smoke" ]]; then
  SMOKE=1
  SECS=${FUZZ_SMOKE_SECONDS:-20}
  shift
  if [[ "${1:-}" == "--junit" ]]; then
    JUNIT=${2:?--junit needs a file}
    shift 2
  fi
else
  SECS=${1:-60}
  shift || true
fi
CXX=${FUZZ_CXX:-clang++-14}

FORMAT_SRCS="runtime/support/DType.cpp runtime/support/HostTensor.cpp \
  runtime/support/AtomicFile.cpp runtime/format/FormatUtil.cpp \
  runtime/format/Safetensors.cpp runtime/format/Npy.cpp runtime/format/Npz.cpp"
FORMAT_LIBS="$(pkg-config --libs libzip)"
CONFIG_SRCS="lib/Config/Json.cpp lib/Config/Located.cpp lib/Config/Reader.cpp \
  lib/Config/ModelConfig.cpp lib/Config/PipelineConfig.cpp \
  lib/Models/Manifest.cpp lib/Models/Buffers.cpp"

RUNTIME_SRCS="runtime/support/DType.cpp runtime/support/HostTensor.cpp runtime/support/AtomicFile.cpp"

# One line per target: "NAME | library sources (relative to the repo) | link flags"
TARGETS=(
  "safetensors_header | $FORMAT_SRCS | $FORMAT_LIBS"
  "npy                | $FORMAT_SRCS | $FORMAT_LIBS"
  "npz                | $FORMAT_SRCS | $FORMAT_LIBS"
  "config             | $FORMAT_SRCS $CONFIG_SRCS | $FORMAT_LIBS"
  "bundle             | $RUNTIME_SRCS runtime/bundle/Bundle.cpp runtime/program/Program.cpp | -lz"
  "host_program       | $RUNTIME_SRCS runtime/program/Program.cpp | "
)

# shellcheck disable=SC2054  # the commas are clang's, not array separators
CXXFLAGS=(-std=c++20 -g -O1 -fno-omit-frame-pointer
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
  -I"$SRC/include" -I"$SRC")

trim() { local s="$1"; s="${s#"${s%%[![:space:]]*}"}"; echo "${s%"${s##*[![:space:]]}"}"; }

mkdir -p "$OUT/obj"
# The newest header or build input: objects older than it are rebuilt.
newest_input=$(find "$SRC/include" "$SRC/runtime" "$SRC/lib" "$SRC/test/fuzz" \
  "$SRC/scripts/fuzz.sh" \( -name '*.h' -o -name fuzz.sh \) -printf '%T@ %p\n' |
  sort -n | tail -1 | cut -d' ' -f2-)

# Compiles a library source unless its object is up to date; sets OBJ.
compile_object() {
  local src=$1
  OBJ="$OUT/obj/$(echo "$src" | tr '/' '_').o"
  if [[ -f "$OBJ" && "$OBJ" -nt "$SRC/$src" && "$OBJ" -nt "$newest_input" ]]; then
    return 0
  fi
  # -fsanitize=fuzzer-no-link: coverage instrumentation without a main().
  "$CXX" "${CXXFLAGS[@]/-fsanitize=fuzzer,address,undefined/-fsanitize=fuzzer-no-link,address,undefined}" \
    -c "$SRC/$src" -o "$OBJ"
}

build_target() {
  local name=$1 srcs=$2 libs=$3 objs=() src main="$SRC/test/fuzz/$1.cpp"
  [[ -f "$main" ]] || main="$SRC/test/fuzz/${name}_fuzzer.cpp"
  for src in $srcs; do
    compile_object "$src" || return 1
    objs+=("$OBJ")
  done
  # shellcheck disable=SC2086
  "$CXX" "${CXXFLAGS[@]}" "$main" "${objs[@]}" $libs -o "$OUT/$name"
}

# Which targets: all, or those named on the command line.
selected=()
for line in "${TARGETS[@]}"; do
  IFS='|' read -r name srcs libs <<<"$line"
  name=$(trim "$name")
  if (($# == 0)) || [[ " $* " == *" $name "* ]]; then
    selected+=("$name|$srcs|$libs")
  fi
done
if ((${#selected[@]} == 0)); then
  echo "fuzz.sh: no such target: $*" >&2
  exit 2
fi

# JUnit XML for --junit: one test case per target ("name|seconds|failure").
cases=()
xml_escape() { sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g' -e 's/"/\&quot;/g'; }
write_junit() {
  [[ -n "$JUNIT" ]] || return 0
  local failures=0 c name secs failure
  for c in "${cases[@]}"; do [[ -n "${c#*|*|}" ]] && failures=$((failures + 1)); done
  {
    echo '<?xml version="1.0" encoding="UTF-8"?>'
    echo "<testsuite name=\"fuzz-smoke\" tests=\"${#cases[@]}\" failures=\"$failures\">"
    for c in "${cases[@]}"; do
      IFS='|' read -r name secs failure <<<"$c"
      echo -n "  <testcase classname=\"fuzz\" name=\"$name\" time=\"$secs\""
      if [[ -n "$failure" ]]; then
        echo "><failure message=\"$(echo "$failure" | xml_escape)\"/></testcase>"
      else
        echo "/>"
      fi
    done
    echo "</testsuite>"
  } >"$JUNIT"
}

status=0
summary=()
for entry in "${selected[@]}"; do
  IFS='|' read -r name srcs libs <<<"$entry"
  echo "== $name: build"
  if ! build_target "$name" "$srcs" "$libs"; then
    echo "fuzz.sh: building $name failed" >&2
    cases+=("$name|0|building the target failed")
    write_junit
    exit 1
  fi
  [[ -n "${FUZZ_BUILD_ONLY:-}" ]] && continue

  work="$OUT/corpus/$name"
  if [[ -n "$SMOKE" ]]; then
    work="$OUT/smoke/$name"
    rm -rf "$work"
  fi
  artifacts="$OUT/artifacts/$name"
  regress="$SRC/test/fuzz/regressions/$name"
  mkdir -p "$work" "$artifacts" "$regress"
  dict=()
  [[ -f "$SRC/test/fuzz/dicts/$name.dict" ]] && dict=(-dict="$SRC/test/fuzz/dicts/$name.dict")
  log="$OUT/$name.log"
  echo "== $name: fuzzing for ${SECS}s (log: $log)"
  "$OUT/$name" "${dict[@]}" -max_total_time="$SECS" -timeout=10 \
    -rss_limit_mb=2048 -max_len=8192 -print_final_stats=1 \
    -artifact_prefix="$artifacts/" \
    "$work" "$SRC/test/fuzz/corpus/$name" "$regress" >"$log" 2>&1
  rc=$?
  execs=$(grep -m1 'stat::number_of_executed_units' "$log" | awk '{print $2}')
  speed=$(grep -m1 'stat::average_exec_per_sec' "$log" | awk '{print $2}')
  rss=$(grep -m1 'stat::peak_rss_mb' "$log" | awk '{print $2}')
  cov=$(grep -E '^#[0-9]+' "$log" | tail -1 | grep -o 'cov: [0-9]*' | awk '{print $2}')
  found=0
  for f in "$artifacts"/crash-* "$artifacts"/leak-* "$artifacts"/timeout-* \
           "$artifacts"/oom-* "$artifacts"/slow-unit-*; do
    [[ -e "$f" ]] || continue
    cp "$f" "$regress/"
    rm "$f"
    found=$((found + 1))
  done
  result="ok"
  if ((rc != 0 || found > 0)); then
    result="FAILED (rc $rc, $found new regression file(s) in test/fuzz/regressions/$name)"
    status=1
    grep -m5 -E 'ERROR|SUMMARY|FUZZ_CHECK|runtime error' "$log" | sed 's/^/   /'
    cases+=("$name|$SECS|$result: $(grep -m1 -E 'ERROR|FUZZ_CHECK|runtime error' "$log" | tr -d '|')")
  else
    cases+=("$name|$SECS|")
  fi
  summary+=("$(printf '%-20s %6ss %10s execs %8s/s  cov %-6s rss %5s MB  %s' \
    "$name" "$SECS" "${execs:-?}" "${speed:-?}" "${cov:-?}" "${rss:-?}" "$result")")
done

if [[ -z "${FUZZ_BUILD_ONLY:-}" ]]; then
  echo "== summary"
  printf '%s\n' "${summary[@]}"
fi
write_junit
exit $status
