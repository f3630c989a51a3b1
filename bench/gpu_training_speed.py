#!/usr/bin/env python3
"""One-GPU training speed: a transformers Llama with attn_implementation="fulcrum" against the same model with
"sdpa", same weights, same documents, AdamW steps in bf16.

The batch: ``--dataset`` document lengths (seed ``--seed``) packed into ``--tokens`` on one rank. Fulcrum runs the
packed rows as one sequence, attention by fulcrum.torch.attention over a ``--planner`` StepPlan (backend
``--backend``: auto picks fa2 for CUDA bf16) under fulcrum.torch.hf.plan_context; sdpa runs each document as its
own sequence (transformers' own attention, causal, no padding: no FLOP wasted, what a user without Fulcrum or
flash-attn can write). Both train ``--steps`` AdamW steps after ``--warmup`` from the same initial weights; reported:
tokens/s (real tokens, medians), peak GPU memory, and the first step's losses (equal within bf16's 2e-2).

Usage (the module built, e.g. PYTHONPATH=build/dev/python):
    python3 bench/gpu_training_speed.py [--tokens 16384] [--layers 4] [--hidden 2048] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fulcrum.torch as ft
import fulcrum.torch.hf as fhf
import torch
import torch.distributed as dist
from fulcrum.torch.packed import PackedRows
from group_of_one import join_group_of_one

import fulcrum

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python" / "examples"))
import llama_model
import train_llama

LOSS_RTOL = 2e-2  # bf16 end to end: the two attentions round differently


def documents(rows: PackedRows, tokens: torch.Tensor, labels: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The rows' whole documents, one (ids [1, n], labels [n]) each."""
    assert all(p.begin == 0 and p.end == rows.doc_lengths[p.doc] for p in rows.pieces), "documents must be whole"
    return [(tokens[p.row : p.row + p.end - p.begin][None], labels[p.row : p.row + p.end - p.begin])
            for p in rows.pieces]


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed_steps(step: Callable[[], float], warmup: int, steps: int,
                device: torch.device) -> tuple[list[float], list[float]]:
    """Losses and synchronised seconds of each measured step."""
    losses, seconds = [], []
    for i in range(warmup + steps):
        sync(device)
        start = time.perf_counter()
        loss = step()
        sync(device)
        if i >= warmup:
            seconds.append(time.perf_counter() - start)
        losses.append(loss)
    return losses, seconds


def main() -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    p.add_argument("--tokens", type=int, default=16384)
    p.add_argument("--dataset", default="pretrain")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--q-heads", type=int, default=16)
    p.add_argument("--kv-heads", type=int, default=4)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--planner", default="packed")
    p.add_argument("--backend", default="auto")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"), help="cpu: a dry run (gloo, fp32)")
    p.add_argument("--json")
    args = p.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        print("gpu_training_speed: no CUDA device (--device cpu for a dry run)")
        return 2
    device = torch.device("cuda", 0) if args.device == "cuda" else torch.device("cpu")
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    if device.type == "cuda":
        torch.cuda.set_device(device)
    join_group_of_one(device)

    head_dim = args.hidden // args.q_heads
    config = llama_model.LlamaConfig(vocab_size=args.vocab, hidden=args.hidden, layers=args.layers,
                                     q_heads=args.q_heads, kv_heads=args.kv_heads, head_dim=head_dim,
                                     ffn_hidden=int(args.hidden * 8 / 3) // 64 * 64, tie_embeddings=False)
    shape = train_llama.model_shape(config)
    stream = fulcrum.BatchStream(fulcrum.make_length_source(args.dataset, args.seed, args.tokens), 1, args.tokens)
    batch = next(stream)
    assignment = fulcrum.make_planner(args.planner, fulcrum.PlannerOptions(shape)).plan(batch)
    step_plan = ft.compile_step(assignment, shape, dtype=dtype)
    rows = PackedRows.from_step(step_plan, 0)
    ids, labels = (t.to(device) for t in train_llama.rank_inputs(assignment.batch, rows, config.vocab_size, args.seed))
    count = train_llama.labelled_rows(assignment.batch)
    positions = rows.positions(device)[None]
    per_document = documents(rows, ids, labels)

    def model_for(attn_implementation: str) -> Any:
        import transformers

        torch.manual_seed(args.seed)  # the same initial weights for both
        model = transformers.LlamaForCausalLM(train_llama.hf_config(config, args.tokens, attn_implementation))
        return model.to(device, dtype)

    results: dict[str, dict[str, Any]] = {}
    for name in ("sdpa", "fulcrum"):
        model = model_for(fhf.NAME if name == "fulcrum" else "sdpa")
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.0)

        def loss_of(model: Any = model, name: str = name) -> torch.Tensor:
            if name == "fulcrum":
                with fhf.plan_context(step_plan, backend=args.backend):
                    logits = model(input_ids=ids[None], position_ids=positions, use_cache=False).logits[0]
                return llama_model.token_loss_sum(logits.float(), labels) / count
            total = torch.zeros((), device=device)
            for doc_ids, doc_labels in per_document:
                logits = model(input_ids=doc_ids, use_cache=False).logits[0]
                total = total + llama_model.token_loss_sum(logits.float(), doc_labels)
            return total / count

        def train(optimizer: torch.optim.Optimizer = optimizer, loss_of: Callable[[], torch.Tensor] = loss_of) -> float:
            optimizer.zero_grad(set_to_none=True)
            loss = loss_of()
            loss.backward()
            optimizer.step()
            return float(loss.detach())  # one sync per step, after it is queued: the step's end

        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        losses, seconds = timed_steps(train, args.warmup, args.steps, device)
        peak = torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else float("nan")
        results[name] = {"losses": losses, "seconds": seconds, "tokens_per_s": rows.rows / statistics.median(seconds),
                         "peak_gib": peak}
        del model, optimizer
        if device.type == "cuda":
            torch.cuda.empty_cache()
    dist.destroy_process_group()

    first = [results[n]["losses"][0] for n in ("fulcrum", "sdpa")]
    loss_error = abs(first[0] - first[1]) / abs(first[1])
    lengths = [d.length for d in assignment.batch.documents]
    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"{device_name}, torch {torch.__version__}, {dtype}, {len(lengths)} documents in "
          f"{rows.rows} tokens (longest {max(lengths)}), Llama {args.layers} layers x {args.hidden}, "
          f"{args.q_heads}/{args.kv_heads} heads; medians of {args.steps} AdamW steps")
    print(f"{'':8s} {'tokens/s':>10s} {'peak GiB':>9s} {'first loss':>11s}")
    for name, r in results.items():
        print(f"{name:8s} {r['tokens_per_s']:10.0f} {r['peak_gib']:9.2f} {r['losses'][0]:11.5f}")
    ratio = results["fulcrum"]["tokens_per_s"] / results["sdpa"]["tokens_per_s"]
    ok = loss_error <= LOSS_RTOL
    print(f"fulcrum / sdpa tokens/s: {ratio:.2f}x (goal >= 0.9x); first losses differ by {loss_error:.1e} "
          f"({'PASS' if ok else 'FAIL'}, tol {LOSS_RTOL:.0e})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": device_name, "torch": torch.__version__, "args": vars(args),
                       "lengths": lengths, "results": results, "ratio": ratio, "loss_error": loss_error}, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
