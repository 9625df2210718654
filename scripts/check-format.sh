#!/usr/bin/env bash
# Fails (exit 1) when a tracked C++ file is not formatted as .clang-format says, naming the files;
# scripts/check.sh runs it. Fix with: scripts/check-format.sh --fix
# The CUDA kernels (*.cu, *.cuh) are not checked yet. (clang-format-14 from Debian, the version the tree is formatted with: another version may disagree).
set -euo pipefail
cd "$(dirname "$0")/.."
CLANG_FORMAT=${CLANG_FORMAT:-clang-format-14}
command -v "$CLANG_FORMAT" >/dev/null || { echo "check-format: $CLANG_FORMAT is missing (scripts/install-deps.sh --test)" >&2; exit 1; }
mapfile -t files < <(git ls-files '*.cpp' '*.h')
if [[ "${1:-}" == "--fix" ]]; then
  "$CLANG_FORMAT" -i "${files[@]}"
  exit 0
fi
bad=$("$CLANG_FORMAT" --dry-run "${files[@]}" 2>&1 | grep -oE '^[^:]+:[0-9]+:[0-9]+: warning' | cut -d: -f1 | sort -u || true)
if [[ -n "$bad" ]]; then
  echo "check-format: not formatted (scripts/check-format.sh --fix):" >&2
  echo "$bad" | sed 's/^/  /' >&2
  exit 1
fi
echo "check-format: ${#files[@]} C++ files formatted"
