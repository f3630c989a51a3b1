#!/usr/bin/env bash
# The main job on a fresh machine: install what is missing, build optimised, and run `fulcrum plan` on
# its defaults (16 ranks x 64K tokens of `pretrain` batches, every planner, verified).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release --target fulcrum_cli
./build/release/bin/fulcrum plan "$@"
