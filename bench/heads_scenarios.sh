#!/usr/bin/env bash
# FlexAttn's ten allocation scenarios with every head solver, in one run (docs/experiments.md).
# Usage: bench/heads_scenarios.sh [FULCRUM] [OUT_DIR]; writes OUT_DIR/S1.json .. S10.json and prints the tables.
set -euo pipefail
fulcrum=${1:-build/release/bin/fulcrum}
out=${2:-docs/figures/heads}
mkdir -p "$out"
for s in S1 S2 S3 S4 S5 S6 S7 S8 S9 S10; do
  "$fulcrum" heads --scenario "$s" --seed 1 --tokens 131072 --repeats 7 --json "$out/$s.json"
done
