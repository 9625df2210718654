#!/usr/bin/env bash
# Fails (exit 1) when a tracked source file is not formatted or spelled as the project's tools say, naming the
# files; scripts/check.sh runs it. Fix the formatting with: scripts/check-format.sh --fix
#   C++     clang-format-14 (.clang-format; the version the tree is formatted with: another may disagree).
#           The CUDA kernels (*.cu, *.cuh) are not checked yet.
#   Python  black (Debian's 23.1; pyproject.toml [tool.black]).
#   Words   codespell over the tracked text files (.codespellrc lists the identifiers it must not "fix").
# The tools come from Debian: scripts/install-deps.sh --test.
set -euo pipefail
cd "$(dirname "$0")/.."
CLANG_FORMAT=${CLANG_FORMAT:-clang-format-14}
for tool in "$CLANG_FORMAT" black codespell; do
  command -v "$tool" >/dev/null || { echo "check-format: $tool is missing (scripts/install-deps.sh --test)" >&2; exit 1; }
done
mapfile -t cpp < <(git ls-files '*.cpp' '*.h')
mapfile -t py < <(git ls-files '*.py')
if [[ "${1:-}" == "--fix" ]]; then
  "$CLANG_FORMAT" -i "${cpp[@]}"
  black -q "${py[@]}"
  exit 0
fi
status=0
bad=$("$CLANG_FORMAT" --dry-run "${cpp[@]}" 2>&1 | grep -oE '^[^:]+:[0-9]+:[0-9]+: warning' | cut -d: -f1 | sort -u || true)
if [[ -n "$bad" ]]; then
  echo "check-format: C++ not formatted (scripts/check-format.sh --fix):" >&2
  echo "$bad" | sed 's/^/  /' >&2
  status=1
fi
if ! black -q --check "${py[@]}" 2>/dev/null; then
  echo "check-format: Python not formatted (scripts/check-format.sh --fix):" >&2
  black --check "${py[@]}" 2>&1 | grep '^would reformat' | sed 's/^would reformat /  /' >&2
  status=1
fi
# Text files only: git's own binary detection (-I) leaves out weights, images and fuzz inputs.
mapfile -t text < <(git grep -I --name-only -e '' -- ':!test/fuzz/corpus' ':!test/fuzz/regressions')
if ! codespell -q 3 "${text[@]}" >&2; then
  echo "check-format: misspellings above (fix them, or add an identifier to .codespellrc)" >&2
  status=1
fi
[[ $status == 0 ]] && echo "check-format: ${#cpp[@]} C++ and ${#py[@]} Python files formatted, ${#text[@]} text files spelled"
exit $status
