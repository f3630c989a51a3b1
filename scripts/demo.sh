#!/usr/bin/env bash
# The main job on a fresh machine: install what is missing, build the CLI, and run `fulcrum demo`: DistCA
# (ping-pong, single-stream, signal) and the packed and per-document-CP baselines on 4 local MPI ranks,
# verified against a single-process reference, with a report folder (JSON, trace, SVG).
# It builds in the dev preset's tree (build/dev/bin/fulcrum), which scripts/test.sh then completes without
# compiling anything twice; the kernels pick the CPU's best ISA at run time in every build (docs/performance.md
# measures the dev, release and pip builds within a few percent of each other).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
source scripts/build_env.sh
cmake --preset dev >/dev/null
cmake --build --preset dev --target fulcrum_cli
./build/dev/bin/fulcrum demo "$@"
