#!/usr/bin/env bash
# clang-tidy (.clang-tidy at the root) over the library's sources and, through them, its headers, using a
# configured build's compile_commands.json (default build/dev, which scripts/test.sh configures). Any
# finding fails (WarningsAsErrors). CI runs this after the dev build.
#   bash scripts/tidy.sh [BUILD_DIR] [-fix]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/dev}
shift || true
[ -f "$build/compile_commands.json" ] || { echo "tidy: no $build/compile_commands.json (configure first)" >&2; exit 2; }
run_tidy=$(command -v run-clang-tidy-14 || command -v run-clang-tidy)
tidy=$(command -v clang-tidy-14 || command -v clang-tidy)
# Library sources only (not the tests, the CLI or the bindings); the regex is matched against absolute paths.
set +e
"$run_tidy" -clang-tidy-binary "$tidy" -p "$build" -j "$(nproc)" -quiet "$@" "$PWD/src/fulcrum/.*(?<!_test)\.cpp$" \
  2>&1 | grep -vE '^/usr/bin/clang-tidy|^[0-9]+ warnings? (and [0-9]+ errors? )?generated\.$|^Suppressed [0-9]+ warnings|^Use -header-filter|^$'
status=${PIPESTATUS[0]}
set -e
[ "$status" -eq 0 ] && echo "tidy: no findings" || echo "tidy: findings above (exit $status)" >&2
exit "$status"
