#!/usr/bin/env bash
# Every test on a fresh machine: install what is missing, build, run ctest.
#   bash scripts/test.sh          the dev build (warnings are errors)
#   bash scripts/test.sh --asan   the AddressSanitizer + UBSan build
set -euo pipefail
cd "$(dirname "$0")/.."
preset=dev
[ "${1:-}" = "--asan" ] && preset=asan
bash scripts/setup.sh
source scripts/build_env.sh
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset"
ctest --preset "$preset" -j "$(nproc)"
