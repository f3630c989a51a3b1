#!/usr/bin/env bash
# clang-format over the C++ tree (.clang-format at the root).
#   bash scripts/format.sh            format every tracked .cpp/.hpp in place
#   bash scripts/format.sh --check    CI: list the files clang-format would change, exit 1 if any
set -euo pipefail
cd "$(dirname "$0")/.."
clang_format=$(command -v clang-format-14 || command -v clang-format)
mapfile -t files < <(git ls-files '*.cpp' '*.hpp')
if [ "${1:-}" != "--check" ]; then
  "$clang_format" -i "${files[@]}"
  exit 0
fi
unformatted=()
for f in "${files[@]}"; do
  [ -f "$f" ] || continue
  "$clang_format" --dry-run --Werror "$f" >/dev/null 2>&1 || unformatted+=("$f")
done
if [ ${#unformatted[@]} -gt 0 ]; then
  printf 'format: %s is not clang-formatted (bash scripts/format.sh)\n' "${unformatted[@]}" >&2
  exit 1
fi
echo "format: all ${#files[@]} files formatted"
