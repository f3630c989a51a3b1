#!/usr/bin/env bash
# The main job on a fresh machine: install what is missing, build optimised, and run `fulcrum demo`:
# DistCA (ping-pong, single-stream, signal) and the packed and per-document-CP baselines on 4 local MPI
# ranks, verified against a single-process reference, with a report folder (JSON, trace, SVG).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release --target fulcrum_cli
./build/release/bin/fulcrum demo "$@"
