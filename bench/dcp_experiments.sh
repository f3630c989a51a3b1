#!/usr/bin/env bash
# The DCP experiments of docs/experiments.md: `fulcrum plan` on 131,072-token batches (32 ranks x 4,096),
# 4 machines x 8 devices, both datasets, the four DCP masks; then DCP alone across block sizes and ε.
#   bash bench/dcp_experiments.sh build/dev/bin/fulcrum
set -euo pipefail
fulcrum=${1:-build/dev/bin/fulcrum}
common=(--ranks 32 --tokens-per-rank 4096 --batches 4 --model llama3-8b)
masks=(causal lambda:64:4096 blockwise:256:2 shared-question:4:20)
for dataset in pretrain prolong; do
  for mask in "${masks[@]}"; do
    echo "### $dataset, $mask"
    "$fulcrum" plan "${common[@]}" --dataset "$dataset" --mask "$mask" --planners dcp,ring,zigzag,distca | tail -n +2
  done
done
for dataset in pretrain prolong; do
  echo "### block size, $dataset, causal"
  for block in 512 1024 2048 4096; do
    "$fulcrum" plan "${common[@]}" --dataset "$dataset" --planners dcp --dcp-block "$block" | sed -n 4p | sed "s/^dcp /dcp-$block/"
  done
  echo "### epsilon (machines, devices), $dataset, causal"
  for eps in 0.1:0.1 0.2:0.1 0.4:0.1 0.4:0.2 0.8:0.1; do
    "$fulcrum" plan "${common[@]}" --dataset "$dataset" --planners dcp --dcp-epsilon-machines "${eps%:*}" \
      --dcp-epsilon-devices "${eps#*:}" | sed -n 4p | sed "s/^dcp /dcp-$eps/"
  done
done
