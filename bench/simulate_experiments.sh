#!/usr/bin/env bash
# The simulator experiments of docs/experiments.md: every table and chart there comes from this script.
#   bash bench/simulate_experiments.sh [FULCRUM] [OUT_DIR]
# FULCRUM defaults to the release build; OUT_DIR (CSV, JSON, SVG) to docs/figures. SIMULATE_EXTRA adds
# options to every study, e.g. SIMULATE_EXTRA='--layer-schedule per-layer' (the model before issue 20).
set -euo pipefail
cd "$(dirname "$0")/.."
fulcrum=${1:-build/release/bin/fulcrum}
out=${2:-docs/figures}
mkdir -p "$out"
run() {  # run NAME ARGS...: one study, its table on stdout, its files under $out
  local name=$1; shift
  echo "### $name: fulcrum simulate $*"
  # shellcheck disable=SC2086  # SIMULATE_EXTRA is a list of options
  /usr/bin/time -f "($name: %e s wall, %U s CPU)" "$fulcrum" simulate "$@" ${SIMULATE_EXTRA:-} \
    --csv "$out/sim-$name.csv" --svg "$out/sim-$name.svg"
  echo
}
# 1. DistCA against WLB-LLM without PP (WLB-LLM searches its CP degree), both datasets.
run nopp-8b --model llama3-8b --pp 1 --search --planners distca,wlb --tokens-per-rank 131072 \
  --sweep gpus=64,128,256 --sweep max-doc-len=131072,262144,524288 --sweep dataset=pretrain,prolong
run nopp-34b --model llama-34b --pp 1 --search --planners distca,wlb --tokens-per-rank 65536 \
  --sweep gpus=64,128,256 --sweep max-doc-len=131072,262144,524288 --sweep dataset=pretrain,prolong
# 2. With PP (4 stages, 8 micro-batches): DistCA's phase-aligned ticks against 1F1B.
run pp-34b --model llama-34b --pp 4 --search --planners distca,wlb,packed --tokens-per-rank 32768 \
  --sweep gpus=128,256,512 --sweep max-doc-len=65536,131072
# 3. Communication ablation.
run ablation --model llama3-8b --planners distca --modes pingpong,single-stream,signal \
  --tokens-per-rank 131072 --max-doc-len 524288 --sweep gpus=64,128,256
# 4. DistCA's tolerance: latency and traffic.
run tolerance --model llama3-8b --planners distca --gpus 256 --tokens-per-rank 131072 \
  --max-doc-len 524288 --sweep tolerance=0,0.02,0.05,0.1,0.2,0.4
# 5. Motivation: per-document CP as CP grows; variable-length packing as DP grows.
run cp-growth --model llama3-8b --planners perdoc-cp --gpus 512 --tokens-per-rank 131072 \
  --max-doc-len 524288 --sweep cp=1,2,4,8,16,32,64
run dp-growth --model llama3-8b --planners wlb,packed,distca --pp 1 --cp-degree 1 --tokens-per-rank 131072 \
  --max-doc-len 131072 --sweep gpus=16,32,64,128,256,512
