#!/usr/bin/env bash
# The GPU acceptance of fulcrum.torch's CUDA path, one command on a lent H100/H200, within 8 minutes (so the
# 15-minute lease can run it twice). Run from the repository root with the .debs bench/gpu_torch_check.sh
# describes in .gpudeps:
#     bash bench/gpu_acceptance.sh
#   1. bench/gpu_torch_check.sh: builds fulcrum._core on the bare machine, then correctness on the GPU against
#      fp64: every 1-rank planner, causal, mixed (lambda, full, per-head) and sparse (vertical-slash,
#      block-sparse, blockwise, shared-question) masks, backends fa2 and triton in bf16 and torch in fp32/bf16,
#      forward and backward; `auto`'s choice; the Triton kernels compiled; a Llama AdamW step against SDPA; 2 and
#      4 processes sharing the GPU over the staged transport (gloo through pinned host memory), every planner.
#   2. bench/torch_attention_speed.py, forward + backward, bf16, pretrain documents, 32/8 heads x 128:
#      causal at 32K and 128K tokens (fa2 and triton on packed and distca plans against one FA2 varlen call:
#      goals >= 0.9x for fa2, >= 0.6x for triton; host time per step and syncs); lambda at 32K (goal >= 0.8x);
#      one 128K document under vertical-slash at 95% sparsity against dense causal FA2 (goal >= 5x faster, and
#      >= 50% of FA2's FLOP/s counted on the tiles computed).
#   3. bench/gpu_training_speed.py: a transformers Llama (4 x 2048, 16/4 heads) trained with
#      attn_implementation="fulcrum" against sdpa per document, tokens/s and peak memory (goal >= 0.9x).
# Output in $OUT (default /tmp/gpu_out): gpu_check.log, speed_*.json, training.json, acceptance.log.
# A dry run on a CPU machine (no Triton: it runs interpreted only, far too slowly at these sizes):
#     DEVICE=cpu TOKENS=2048 LONG=4096 BACKENDS=fa2 CHECK_ARGS="--device cpu" bash bench/gpu_acceptance.sh
set -uo pipefail
OUT=${OUT:-/tmp/gpu_out}
BUILD=${BUILD:-/tmp/gpubuild}
DEPS=${DEPS:-/tmp/deps}
PYTHON=${PYTHON:-python3}
DEVICE=${DEVICE:-cuda}
TOKENS=${TOKENS:-32768}  # the causal and lambda runs' batch
LONG=${LONG:-131072}     # the long causal run and the vertical-slash document
BACKENDS=${BACKENDS:-fa2,triton}
CHECK_ARGS=${CHECK_ARGS:---multi-timeout 90}
export OUT BUILD DEPS PYTHON CHECK_ARGS
mkdir -p "$OUT"
start=$SECONDS
status=0
bash bench/gpu_torch_check.sh || status=1
# The environment gpu_torch_check.sh ran the check in: its build's module, the unpacked libfmt, compiled Triton.
export PYTHONPATH="$BUILD/python${PYTHONPATH:+:$PYTHONPATH}"
export LD_LIBRARY_PATH="$DEPS/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
unset TRITON_INTERPRET
speed() {  # name, timeout, then torch_attention_speed.py's arguments
  local name=$1 limit=$2
  shift 2
  echo "== speed: $name ($((SECONDS - start)) s in)"
  timeout "$limit" "$PYTHON" bench/torch_attention_speed.py --device "$DEVICE" --dtype bf16 --backends "$BACKENDS" \
    --repeats 5 --json "$OUT/speed_$name.json" "$@"
}
(
  failed=0
  speed "causal_$TOKENS" 90 --tokens "$TOKENS" --planners packed,distca || failed=1
  speed "causal_$LONG" 150 --tokens "$LONG" --planners packed,distca || failed=1
  speed "lambda_$TOKENS" 90 --tokens "$TOKENS" --planners packed,distca --mask lambda:64:4096 || failed=1
  speed "vslash95_$LONG" 120 --tokens "$LONG" --dataset "uniform:$LONG:$LONG" --planners packed \
    --vslash-sparsity 0.95 || failed=1
  echo "== training ($((SECONDS - start)) s in)"
  if [ "$DEVICE" = cuda ]; then
    timeout 120 "$PYTHON" bench/gpu_training_speed.py --json "$OUT/training.json" || failed=1
  else
    timeout 120 "$PYTHON" bench/gpu_training_speed.py --device cpu --tokens 1024 --layers 2 --hidden 128 \
      --q-heads 4 --kv-heads 2 --vocab 256 --steps 2 --json "$OUT/training.json" || failed=1
  fi
  exit $failed
) 2>&1 | tee "$OUT/acceptance.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
echo "gpu_acceptance: exit $status after $((SECONDS - start)) s; results in $OUT" | tee -a "$OUT/acceptance.log"
exit $status
