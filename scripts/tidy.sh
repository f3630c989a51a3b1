#!/usr/bin/env bash
# clang-tidy (.clang-tidy at the root) over the library's sources and, through them, its headers, using a
# configured and built tree's compile_commands.json and dependency log (default build/dev, which
# scripts/test.sh builds). Any finding fails (WarningsAsErrors). A source whose exact input (itself, every
# header it includes, its flags, the configuration, the tool) passed before is not re-checked: scripts/tidy.py.
#   bash scripts/tidy.sh [BUILD_DIR] [-fix]      (-fix, or --no-cache, checks every file)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/dev}
shift || true
flags=() tidy_args=()
for arg in "$@"; do
  case "$arg" in
    --no-cache) flags+=(--no-cache) ;;
    *) tidy_args+=("$arg") ;;
  esac
done
exec python3 scripts/tidy.py "$build" "${flags[@]}" -- "${tidy_args[@]}"
