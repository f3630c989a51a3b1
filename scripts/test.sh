#!/usr/bin/env bash
# Every test on a fresh machine: install what is missing, build, run ctest.
#   bash scripts/test.sh          the dev build (warnings are errors), every test
#   bash scripts/test.sh --quick  the inner loop: the dev build, every test but the multi-process (`mpi`),
#                                 Python (`python`) and `slow` ones, which the full run adds (about 2 minutes
#                                 after a change to one file; CONTRIBUTING.md)
#   bash scripts/test.sh --asan   the AddressSanitizer + UBSan build (its test preset leaves out the `variant`
#                                 tests, whose family's representative it runs)
set -euo pipefail
cd "$(dirname "$0")/.."
preset=dev
filter=()
case "${1:-}" in
  --asan) preset=asan ;;
  --quick) filter=(-LE '^(mpi|python|slow)$') ;;
  "") ;;
  *) echo "test.sh: unknown option '$1' (expected --quick or --asan)" >&2; exit 2 ;;
esac
bash scripts/setup.sh
source scripts/build_env.sh
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset"
ctest --preset "$preset" -j "$(nproc)" "${filter[@]}"
