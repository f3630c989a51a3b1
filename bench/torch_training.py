#!/usr/bin/env python3
"""Training throughput and the attention straggler per planner: python/examples/train_llama.py's step on gloo ranks.

Every planner trains the same model (same initial weights) on the same imbalanced batch, repeated each step
(the first batch of ``--dataset`` at ``--seed``, whose packed attention imbalance is printed), on ``--ranks``
gloo processes with one thread each. Per step and rank: the step's wall time (train_step: forward, backward,
gradient all-reduce, AdamW), its forward/backward split, and the CPU time of the rank's attention kernel
calls (thread CPU time of fulcrum's C++ kernels, timed by a wrapping kernel backend). Medians over
``--steps`` steps after ``--warmup``; a table and, with --json, the same as JSON.

Reading it on a machine with fewer cores than ranks: processes share cores, so a step's wall time is about
the SUM of the ranks' work divided by the cores, not the slowest rank's; balancing attention cannot shorten
it there the way it does with one accelerator per rank. What carries over is the per-rank attention compute
(max/mean over ranks, in CPU time, which time-sharing does not inflate): the straggler a step waits for.

Usage: PYTHONPATH=build/dev/python python3 bench/torch_training.py [--ranks 4] [--tokens-per-rank 4096]
       [--seed 36] [--planners distca,packed,dcp] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from fulcrum.torch.backend_fulcrum import FulcrumBackend

import fulcrum

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python" / "examples"))
import train_llama


class TimedKernels:
    """fulcrum's C++ kernels, adding up each call's CPU time on the calling thread (the kernels run there with
    one OpenMP thread) and its wall time, per pass."""

    name = "fulcrum (timed)"

    def __init__(self) -> None:
        self.inner = FulcrumBackend()
        self.cpu_s = {"forward": 0.0, "backward": 0.0}
        self.wall_s = {"forward": 0.0, "backward": 0.0}

    def reset(self) -> None:
        for d in (self.cpu_s, self.wall_s):
            d["forward"] = d["backward"] = 0.0

    def _timed(self, kind, call, *args) -> None:
        cpu, wall = time.thread_time(), time.perf_counter()
        call(*args)
        self.cpu_s[kind] += time.thread_time() - cpu
        self.wall_s[kind] += time.perf_counter() - wall

    def forward(self, plan, op, buffers, scale) -> None:
        self._timed("forward", self.inner.forward, plan, op, buffers, scale)

    def backward(self, plan, op, buffers, scale) -> None:
        self._timed("backward", self.inner.backward, plan, op, buffers, scale)


# Planner options as train_llama's small-batch defaults, but DistCA's shards finer for 4K-token ranks.
OPTIONS = {"distca": {"granularity": 64}, "dcp": {"dcp_block": 256}, "perdoc-cp": {"cp_degree": 2},
           "wlb": {"cp_degree": 2}}


def the_batch(args) -> fulcrum.Batch:
    source = fulcrum.make_length_source(args.dataset, seed=args.seed, tokens_per_rank=args.tokens_per_rank)
    return fulcrum.BatchStream(source, args.ranks, args.tokens_per_rank).next()


def rank_main(rank, args, port, out) -> None:
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("gloo", rank=rank, world_size=args.ranks, init_method=f"tcp://127.0.0.1:{port}",
                            timeout=timedelta(seconds=600))
    torch.set_num_threads(1)
    config = train_llama.model_config(args)
    shape = train_llama.model_shape(config)
    batch = the_batch(args)
    kernels = TimedKernels()
    results = {}
    for name in args.planners.split(","):
        model = train_llama.make_model("plain", config, args.ranks * args.tokens_per_rank, args.seed)
        optimizer = torch.optim.AdamW(model.module.parameters(), lr=args.lr, weight_decay=0.0)
        options = train_llama.planner_options(name, shape, args.ranks, args.seed, OPTIONS.get(name))
        start = time.perf_counter()
        assignment = fulcrum.make_planner(name, options).plan(batch)
        plan_s = time.perf_counter() - start
        steps = []
        for _ in range(args.warmup + args.steps):
            attention, rows = train_llama.make_attention("fulcrum", assignment, shape, rank, backend=kernels)
            kernels.reset()
            dist.barrier()
            cpu, wall = time.thread_time(), time.perf_counter()
            result = train_llama.train_step(model, optimizer, attention, rows, assignment.batch, args.vocab, args.seed)
            wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
            if result is None:
                raise SystemExit(f"{name}: the plan trains no tokens of this batch")
            steps.append({"wall_s": wall, "cpu_s": cpu, "forward_s": result.forward_s,
                          "backward_s": result.backward_s, "loss": result.loss,
                          "attention_cpu_s": dict(kernels.cpu_s), "attention_wall_s": dict(kernels.wall_s)})
        every = [None] * args.ranks
        dist.all_gather_object(every, steps[args.warmup:])
        results[name] = {"per_rank": every, "tokens": assignment.batch.total_tokens(), "plan_s": plan_s,
                         "flops_imbalance": train_llama.imbalance(train_llama.attention_flops_per_rank(shape,
                                                                                                       assignment))}
    if rank == 0:
        with open(out, "w") as f:
            json.dump(results, f)
    dist.barrier()  # every rank done with the group: gloo's threads can abort one torn down under a peer
    dist.destroy_process_group()


def summarise(name: str, result: dict) -> dict:
    """Medians over the timed steps of the per-step values across ranks."""
    per_rank = result["per_rank"]  # [rank][step]
    steps = range(len(per_rank[0]))

    def across(step: int, value) -> list[float]:
        return [value(r[step]) for r in per_rank]

    def median(of) -> float:
        return statistics.median(of(s) for s in steps)

    attention = lambda s: s["attention_cpu_s"]["forward"] + s["attention_cpu_s"]["backward"]  # noqa: E731
    step_wall = lambda i: max(across(i, lambda s: s["wall_s"]))  # noqa: E731
    return {
        "planner": name,
        "tokens": result["tokens"],
        "tokens_per_s": median(lambda i: result["tokens"] / step_wall(i)),
        "step_s": median(step_wall),
        "forward_s": median(lambda i: max(across(i, lambda s: s["forward_s"]))),
        "backward_s": median(lambda i: max(across(i, lambda s: s["backward_s"]))),
        "attention_cpu_max_s": median(lambda i: max(across(i, attention))),
        "attention_cpu_mean_s": median(lambda i: statistics.mean(across(i, attention))),
        "attention_imbalance": median(lambda i: train_llama.imbalance(across(i, attention))),
        "attention_forward_cpu_max_s": median(lambda i: max(across(i, lambda s: s["attention_cpu_s"]["forward"]))),
        "attention_backward_cpu_max_s": median(lambda i: max(across(i, lambda s: s["attention_cpu_s"]["backward"]))),
        "rank_cpu_max_s": median(lambda i: max(across(i, lambda s: s["cpu_s"]))),
        "rank_cpu_mean_s": median(lambda i: statistics.mean(across(i, lambda s: s["cpu_s"]))),
        "flops_imbalance": result["flops_imbalance"],
        "plan_s": result["plan_s"],
        "losses": [s["loss"] for s in per_rank[0]],
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--tokens-per-rank", type=int, default=4096)
    p.add_argument("--dataset", default="pretrain")
    p.add_argument("--seed", type=int, default=36)
    p.add_argument("--planners", default="distca,packed,dcp")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--warmup", type=int, default=1)
    train_llama.add_model_arguments(p)
    p.add_argument("--json")
    args = p.parse_args()
    config = train_llama.model_config(args)
    batch = the_batch(args)
    packing = train_llama.imbalance(train_llama.packing_flops_per_rank(train_llama.model_shape(config), batch))
    print(f"torch_training: {args.ranks} gloo ranks x {args.tokens_per_rank} tokens, {args.dataset} seed {args.seed}: "
          f"{len(batch.documents)} documents {[d.length for d in batch.documents]}, packed attention imbalance "
          f"{packing:.2f} (max/mean FLOPs); {os.cpu_count()} cores", flush=True)
    os.environ["OMP_NUM_THREADS"] = "1"  # the children's kernels run on their calling thread: thread CPU time
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, "rank0.json")
        mp.spawn(rank_main, args=(args, port, out), nprocs=args.ranks, join=True)
        with open(out) as f:
            results = json.load(f)
    rows = [summarise(name, result) for name, result in results.items()]
    print("| planner | tokens/s | step s | forward s | backward s | attention CPU s, max rank | mean rank | "
          "attention imbalance (CPU) | (FLOPs) | rank CPU s, max | mean |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['planner']} | {r['tokens_per_s']:.0f} | {r['step_s']:.3f} | {r['forward_s']:.3f} | "
              f"{r['backward_s']:.3f} | {r['attention_cpu_max_s']:.3f} | {r['attention_cpu_mean_s']:.3f} | "
              f"{r['attention_imbalance']:.2f} | {r['flops_imbalance']:.2f} | {r['rank_cpu_max_s']:.3f} | "
              f"{r['rank_cpu_mean_s']:.3f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "packed_flops_imbalance": packing, "planners": rows}, f, indent=1)


if __name__ == "__main__":
    main()
