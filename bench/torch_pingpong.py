#!/usr/bin/env python3
"""Exposed communication of fulcrum.torch.PingPong against the same layers run without interleaving.

Every rank is a CPU process on one gloo group. Each step takes one `pretrain` micro-batch from a
BatchStream (documents cut at rank boundaries become separate documents: each rank's pieces are its
cu_seqlens, as a per-rank data loader would give them), splits it into two nano-batches of whole documents
(a micro-batch where every rank holds a single document has no second nano-batch and is skipped, counted)
(plan_nano_batches, distca, single-stream plans) and runs a stack of Llama-like layers (RMSNorm, Q/K/V
projections, RoPE, GQA attention, O projection, SwiGLU) forward and backward under three schedules:

  pingpong    PingPong: one nano-batch's attention traffic overlaps the other's layers (DistCA's schedule)
  sequential  the same two nano-batches and plans, A's whole stack then B's, nothing interleaved
  one-batch   the micro-batch as one plan compiled in mode pingpong (overlap inside attention only)

Per rank and pass it measures the wall time, the time blocked in waits (fulcrum.torch.measure_waits:
communication that compute did not hide, plus waiting for slower ranks) and, from PingPong's timestamped
trace gathered from every rank, the *exposed* part of it: blocked after every peer had posted the matching
launch (the C++ runtime's definition; the rest is waiting for a slower rank). one-batch runs
fulcrum.torch.attention, which has no trace: blocked time only. The table gives, per schedule, the median
over steps of the slowest rank's wall time and of the ranks' mean and max blocked and exposed time. The
schedules run in rotating order inside each step so that drift in machine load is shared.

Usage: python3 bench/torch_pingpong.py [--ranks 4] [--tokens-per-rank 8192] [--layers 2] [--steps 5]
       [--json out.json]          (PYTHONPATH must reach the fulcrum package; see docs/performance.md)
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import tempfile
import time
from datetime import timedelta

import fulcrum.torch as ft
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

import fulcrum

SCHEDULES = ("pingpong", "sequential", "one-batch")


class LlamaLayer(nn.Module):
    """One decoder layer in the PingPongLayer protocol; context = (cos, sin) of the nano-batch's rows."""

    def __init__(self, a: argparse.Namespace) -> None:
        super().__init__()
        self.shape = (a.q_heads, a.kv_heads, a.head_dim)
        self.norm1, self.norm2 = nn.RMSNorm(a.hidden), nn.RMSNorm(a.hidden)
        self.q = nn.Linear(a.hidden, a.q_heads * a.head_dim, bias=False)
        self.kv = nn.Linear(a.hidden, 2 * a.kv_heads * a.head_dim, bias=False)
        self.o = nn.Linear(a.q_heads * a.head_dim, a.hidden, bias=False)
        self.gate_up = nn.Linear(a.hidden, 2 * a.ffn, bias=False)
        self.down = nn.Linear(a.ffn, a.hidden, bias=False)

    def pre_attention(self, x, context):
        q_heads, kv_heads, head_dim = self.shape
        h, rows = self.norm1(x), x.shape[0]
        k, v = self.kv(h).view(rows, 2, kv_heads, head_dim).unbind(1)
        q = rope(self.q(h).view(rows, q_heads, head_dim), *context)
        return q.contiguous(), rope(k, *context).contiguous(), v.contiguous(), x

    def post_attention(self, o, x, context):
        x = x + self.o(o.flatten(1))
        gate, up = self.gate_up(self.norm2(x)).chunk(2, dim=-1)
        return x + self.down(nn.functional.silu(gate) * up)


def rope(x, cos, sin):
    half = x.shape[-1] // 2
    return x * cos[:, None] + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin[:, None]


def rope_context(cu: list[int], head_dim: int):
    positions = torch.cat([torch.arange(cu[i + 1] - cu[i]) for i in range(len(cu) - 1)] + [torch.zeros(0)])
    angles = positions[:, None] * 10000.0 ** -(torch.arange(0, head_dim, 2) / head_dim)
    angles = torch.cat((angles, angles), dim=-1)
    return angles.cos(), angles.sin()


def per_rank_cu_seqlens(batch: fulcrum.Batch) -> list[list[int]]:
    cu = [[0] for _ in range(batch.ranks)]
    for s in batch.segments:
        cu[s.rank].append(cu[s.rank][-1] + s.tokens[1] - s.tokens[0])
    return cu


def model_shape(a: argparse.Namespace) -> fulcrum.ModelShape:
    m = fulcrum.ModelShape()
    m.name, m.layers, m.hidden, m.ffn_hidden = "bench-pingpong", a.layers, a.hidden, a.ffn
    m.q_heads, m.kv_heads, m.head_dim, m.dtype_bytes = a.q_heads, a.kv_heads, a.head_dim, 4
    return m


def run_one_batch(layers, x, step, context):
    for layer in layers:
        q, k, v, saved = layer.pre_attention(x, context)
        x = layer.post_attention(ft.attention(q, k, v, step, backend="fulcrum"), saved, context)
    return x


class Recorder:
    """PingPong's trace with the time of each event (perf_counter is CLOCK_MONOTONIC: one clock for all ranks)."""

    def __init__(self) -> None:
        self.events: list[tuple[float, str]] = []

    def __call__(self, event: str) -> None:
        self.events.append((time.perf_counter(), event))


def launch_index(step: ft.StepPlan) -> dict[tuple[str, str, int, int, int], int]:
    """(pass, side, rank, peer, tag) -> the id of the launch on ``rank`` that posts that side of the transfer (both
    sides of a transfer carry the same messages, so the same first tag: the plan's posting order)."""
    index = {}
    for pass_, plan in (("forward", step._forward), ("backward", step._backward)):
        for program in plan.programs:
            for i in program.instructions:
                if type(i).__name__ == "Launch":
                    for t in i.transfers:
                        index[pass_, "send" if t.send else "receive", program.rank, t.peer, t.tag] = i.id
    return index


def exposed_seconds(rank: int, events_by_rank: list[list[tuple[float, str]]], steps, pass_: str) -> float:
    """Of this rank's time blocked in waits, the part after every peer had posted the matching launch (the
    C++ runtime's "exposed"; the rest is waiting for a slower rank, not for the network)."""
    posted = [{e: t for t, e in events if " launch " in e} for events in events_by_rank]
    indexes = [launch_index(step) for step in steps]
    total, started = 0.0, {}
    for t, e in events_by_rank[rank]:
        label, what, launch = e.rsplit(" ", 2)
        if not label.endswith(pass_) or what not in ("wait", "waited"):
            continue
        if what == "wait":
            started[label, launch] = t
            continue
        nano = "AB".index(label[0])
        plan = steps[nano]._forward if pass_ == "forward" else steps[nano]._backward
        mine = next(i for i in plan.programs[rank].instructions if type(i).__name__ == "Launch" and i.id == int(launch))
        ready = started[label, launch]
        # A transfer this rank sends is received by the peer's launch that receives it, and the reverse.
        for transfer in mine.transfers:
            side = "receive" if transfer.send else "send"
            peer_launch = indexes[nano][pass_, side, transfer.peer, rank, transfer.tag]
            ready = max(ready, posted[transfer.peer][f"{label} launch {peer_launch}"])
        total += max(0.0, t - ready)
    return total


def timed_step(schedule, layers, model, x, g, plans, contexts, whole_context):
    for layer in layers:
        layer.zero_grad(set_to_none=True)
    x = x.clone().requires_grad_()
    recorder = model.trace = Recorder()
    out = {}
    dist.barrier()
    start = time.perf_counter()
    with ft.measure_waits() as forward_wait:
        if schedule == "one-batch":
            y = run_one_batch(layers, x, plans["whole"], whole_context)
        else:
            y = model(x, plans["nano"], contexts, schedule=schedule)
    out["forward_s"], out["forward_wait_s"] = time.perf_counter() - start, forward_wait.seconds
    dist.barrier()
    start = time.perf_counter()
    with ft.measure_waits() as backward_wait:
        (y * g).sum().backward()
    out["backward_s"], out["backward_wait_s"] = time.perf_counter() - start, backward_wait.seconds
    if schedule != "one-batch":  # attention() has no trace: one-batch reports blocked time only
        events_by_rank = [None] * dist.get_world_size()
        dist.all_gather_object(events_by_rank, recorder.events)
        for pass_ in ("forward", "backward"):
            out[f"{pass_}_exposed_s"] = exposed_seconds(dist.get_rank(), events_by_rank, plans["nano"], pass_)
    return out


def run_rank(rank: int, a: argparse.Namespace, port: int, out_dir: str) -> None:
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("gloo", rank=rank, world_size=a.ranks, init_method=f"tcp://127.0.0.1:{port}",
                            timeout=timedelta(seconds=300))
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    layers = [LlamaLayer(a) for _ in range(a.layers)]
    model = ft.PingPong(layers, backend="fulcrum")
    shape = model_shape(a)
    planner = fulcrum.make_planner(a.planner, fulcrum.PlannerOptions(shape))
    stream = fulcrum.BatchStream(fulcrum.make_length_source("pretrain", seed=a.seed,
                                                            tokens_per_rank=a.tokens_per_rank),
                                 a.ranks, a.tokens_per_rank)
    records, skipped, step = [], 0, -1
    while step < a.steps:  # step 0 warms up (allocations, kernel caches) and is not reported
        cu = per_rank_cu_seqlens(stream.next())
        try:
            steps = ft.plan_nano_batches(planner, cu, shape)
        except fulcrum.InputError:  # every rank holds one document: no B to ping-pong with (every rank sees it)
            skipped += 1
            continue
        step += 1
        whole = ft.compile_step(planner.plan(fulcrum.Batch.from_cu_seqlens(cu)), shape, mode="pingpong")
        first, second = ft.split_documents(cu)
        contexts = (rope_context(first[rank], a.head_dim), rope_context(second[rank], a.head_dim))
        g = torch.Generator().manual_seed(step * 100 + rank)
        x, grad = (torch.randn(cu[rank][-1], a.hidden, generator=g) for _ in range(2))
        order = SCHEDULES[step % 3:] + SCHEDULES[: step % 3]
        for schedule in order:
            result = timed_step(schedule, layers, model, x, grad, {"nano": steps, "whole": whole}, contexts,
                                rope_context(cu[rank], a.head_dim))
            if step > 0:
                records.append(dict(result, step=step, schedule=schedule, rank=rank,
                                    documents=[len(c) - 1 for c in cu],
                                    rows=[steps[0].rows(rank), steps[1].rows(rank)]))
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump({"records": records, "skipped": skipped}, f)
    dist.barrier()  # every rank done with the group: gloo's threads can abort one torn down under a peer
    dist.destroy_process_group()


def summarise(records: list[dict]) -> dict[str, dict[str, float]]:
    """Per schedule and pass: the median over steps of the slowest rank's wall time, and of the ranks' mean
    and max blocked ("wait") and exposed time."""
    out = {}
    for schedule in SCHEDULES:
        mine = [r for r in records if r["schedule"] == schedule]
        by_step = [[r for r in mine if r["step"] == s] for s in sorted({r["step"] for r in mine})]
        row = {}
        for pass_ in ("forward", "backward"):
            row[f"{pass_}_s"] = statistics.median(max(r[f"{pass_}_s"] for r in rs) for rs in by_step)
            for kind in ("wait", "exposed"):
                key = f"{pass_}_{kind}_s"
                if key in mine[0]:
                    means = [statistics.fmean(r[key] for r in rs) for rs in by_step]
                    row[f"{pass_}_{kind}_mean_s"] = statistics.median(means)
                    row[f"{pass_}_{kind}_max_s"] = statistics.median(max(r[key] for r in rs) for rs in by_step)
        out[schedule] = row
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--tokens-per-rank", type=int, default=8192)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--q-heads", type=int, default=8)
    p.add_argument("--kv-heads", type=int, default=4)
    p.add_argument("--head-dim", type=int, default=32)
    p.add_argument("--ffn", type=int, default=688)
    p.add_argument("--steps", type=int, default=5, help="measured steps (one more warms up)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--planner", default="distca")
    p.add_argument("--threads", type=int, default=1, help="torch threads per process")
    p.add_argument("--json", help="write the per-rank records and the summary here")
    a = p.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", str(a.threads))  # the fulcrum kernels' OpenMP threads
    with tempfile.TemporaryDirectory() as out_dir, socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        mp.spawn(run_rank, args=(a, port, out_dir), nprocs=a.ranks, join=True)
        ranks = [json.load(open(os.path.join(out_dir, f"rank{rank}.json"))) for rank in range(a.ranks)]
    records = [r for rank in ranks for r in rank["records"]]
    summary = summarise(records)
    print(f"{a.ranks} gloo processes, pretrain seed {a.seed}, {a.tokens_per_rank} tokens/rank, {a.layers} layers, "
          f"hidden {a.hidden}, {a.q_heads}/{a.kv_heads} heads x {a.head_dim}, ffn {a.ffn}, planner {a.planner}, "
          f"median of {a.steps} steps (wall: slowest rank; wait = blocked, exposed = blocked after the peers "
          f"posted: mean and max over ranks); "
          f"{ranks[0]['skipped']} micro-batches skipped (every rank held one document)")
    columns = [(f"{p} {c}", f"{p}_{k}") for p in ("forward", "backward")
               for c, k in (("s", "s"), ("wait mean", "wait_mean_s"), ("wait max", "wait_max_s"),
                            ("exposed mean", "exposed_mean_s"), ("exposed max", "exposed_max_s"))]
    print("| schedule | " + " | ".join(name for name, _ in columns) + " |")
    print("|---|" + "---|" * len(columns))
    for schedule, r in summary.items():
        cells = [f"{r[key]:.3f}" if key in r else "n/a" for _, key in columns]
        print(f"| {schedule} | " + " | ".join(cells) + " |")
    result = {"arguments": vars(a), "summary": summary, "skipped": ranks[0]["skipped"], "records": records}
    print(json.dumps({"summary": summary}))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
