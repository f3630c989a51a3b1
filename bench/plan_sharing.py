#!/usr/bin/env python3
"""Every rank plans the batch itself, or one rank plans and broadcasts the plan: what each costs.

For each planner, on `--ranks` gloo processes (loopback), over `--batches` full batches of `--dataset`
(fulcrum.BatchStream, seeded), every rank times (a) planning and compiling the forward and backward
StepPlan itself and (b) rank 0 broadcasting both plans' bytes (torch.distributed.broadcast_object_list)
and the others decoding them, then (c) check_same_step's digest all-gather. Prints a table of medians
over batches (rank 0's view; max over ranks for the broadcast) and, with --json, the same as JSON.

Usage: PYTHONPATH=build/dev/python python3 bench/plan_sharing.py [--ranks 4] [--tokens-per-rank 16384]
"""
import argparse
import json
import os
import socket
import statistics
import time
from datetime import timedelta

import fulcrum.torch as ft
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import fulcrum


def rank_main(rank, args, port, out):
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("gloo", rank=rank, world_size=args.ranks, init_method=f"tcp://127.0.0.1:{port}",
                            timeout=timedelta(seconds=300))
    torch.set_num_threads(1)
    model = fulcrum.model_shape(args.model)
    results = {}
    for name in args.planners.split(","):
        planner = fulcrum.make_planner(name, fulcrum.PlannerOptions(model))
        stream = fulcrum.BatchStream(fulcrum.make_length_source(args.dataset, seed=args.seed,
                                                                tokens_per_rank=args.tokens_per_rank),
                                     args.ranks, args.tokens_per_rank)
        plan_s, share_s, check_s, size = [], [], [], []
        for _ in range(args.batches):
            batch = stream.next()
            start = time.perf_counter()
            step = ft.compile_step(planner.plan(batch), model)
            plan_s.append(time.perf_counter() - start)
            dist.barrier()
            start = time.perf_counter()
            data = [step.forward_plan.to_bytes(), step.backward_plan.to_bytes()] if rank == 0 else [None, None]
            dist.broadcast_object_list(data, 0)
            received = ft.StepPlan(fulcrum.Plan.from_bytes(data[0]), fulcrum.Plan.from_bytes(data[1]))
            elapsed = torch.tensor([time.perf_counter() - start], dtype=torch.float64)
            dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
            share_s.append(float(elapsed))
            dist.barrier()
            start = time.perf_counter()
            ft.check_same_step(received)
            check_s.append(time.perf_counter() - start)
            size.append(len(data[0]) + len(data[1]))
        results[name] = {"plan_and_compile_s": statistics.median(plan_s), "broadcast_s": statistics.median(share_s),
                         "digest_check_s": statistics.median(check_s), "plan_bytes": statistics.median(size)}
    if rank == 0:
        with open(out, "w") as f:
            json.dump(results, f)
    dist.barrier()  # every rank done with the group: gloo's threads can abort one torn down under a peer
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--tokens-per-rank", type=int, default=16384)
    p.add_argument("--dataset", default="pretrain")
    p.add_argument("--model", default="llama3-8b")
    p.add_argument("--planners", default="distca,dcp,packed,zigzag")
    p.add_argument("--batches", type=int, default=6)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json")
    args = p.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = args.json or "/tmp/fulcrum_plan_sharing.json"
    os.environ["OMP_NUM_THREADS"] = "1"
    mp.spawn(rank_main, args=(args, port, out), nprocs=args.ranks, join=True)
    with open(out) as f:
        results = json.load(f)
    print(f"{args.ranks} ranks x {args.tokens_per_rank} tokens of {args.dataset}, {args.model}, "
          f"medians over {args.batches} batches")
    print("| planner | plan + compile on each rank (ms) | broadcast + decode (ms) | digest check (ms) | plan kB |")
    print("|---|---|---|---|---|")
    for name, r in results.items():
        print(f"| {name} | {r['plan_and_compile_s'] * 1e3:.2f} | {r['broadcast_s'] * 1e3:.2f} | "
              f"{r['digest_check_s'] * 1e3:.2f} | {r['plan_bytes'] / 1e3:.0f} |")


if __name__ == "__main__":
    main()
