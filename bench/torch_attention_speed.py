#!/usr/bin/env python3
"""fulcrum.torch.attention's speed on one device beside torch's own attention, forward + backward.

One rank (a process group of one: NCCL on CUDA, gloo on CPU), so a plan moves nothing and this times the
executor and the kernel backend, not communication. The batch: document lengths drawn from ``--dataset`` (seed
``--seed``) packed into ``--tokens`` on one rank, as fulcrum.BatchStream packs them, GQA ``--q-heads`` over
``--kv-heads`` of ``--head-dim``, every document under ``--mask`` (causal by default), or with ``--vslash-sparsity
S`` under a blockified vertical-slash mask (MTraining's, 64-token blocks: random vertical columns and block
diagonals, the first eight included) that leaves a fraction S of each document's causal pairs out. Each row
times q, k, v -> O, then O.backward(dO), device-synchronised:
- ``sdpa per document`` (causal only): torch.nn.functional.scaled_dot_product_attention per document, is_causal,
  enable_gqa (the kernel torch picks: flash or memory-efficient on CUDA), what a user writes without Fulcrum;
- ``fa2 varlen, one call``: torch's FlashAttention-2 varlen op over all documents in one *causal* call (what
  ``torch.nn.attention.varlen.varlen_attn`` calls; on CPU, backend fa2's per-sequence route): the bar for the
  ``fa2`` backend's overhead, and under a sparse mask the dense causal work the mask saves;
- ``fulcrum <planner> <backend>``: fulcrum.torch.attention on ``compile_step(plan)``, every backend the device
  runs (fa2, triton and torch on CUDA, flash where flash-attn is installed; fulcrum, torch and fa2 on CPU).
Columns: the median time over ``--repeats`` after ``--warmup``; TFLOP/s counted on the mask's visible pairs
(4 FLOPs per pair and head-dim element forward, x3.5 with backward) and, for the Triton kernels, on the 64 x 64
tiles they compute ("tiles"); "x varlen": throughput over the varlen call's; "host ms": the time until the
step's last kernel is queued, not waiting for the device (Python and launches; on CPU everything is host), and
"syncs": device-to-host synchronisations in one step (torch.cuda's sync debug mode; CUDA only).
Outputs are checked before timing: against SDPA's under causal (max |diff| / max |SDPA| <= 2e-2 in bf16, 1e-4
in fp32), else against the first fulcrum row's (two independent kernel paths: fa2's pieces and Triton's tiles).

Usage: PYTHONPATH=build/release/python python3 bench/torch_attention_speed.py [--device cuda] [--tokens 32768]
       [--dtype bf16] [--planners packed,distca] [--backends fa2,triton] [--mask lambda:64:4096]
       [--vslash-sparsity 0.95 --dataset uniform:131072:131072] [--repeats 10] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import time
import warnings
from collections.abc import Callable

import fulcrum.torch as ft
import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from fulcrum.torch.backend_fa2 import fa2_kernels
from fulcrum.torch.backend_flash import CAUSAL, FlashCall, VarlenKernels, flash_available
from fulcrum.torch.backend_fulcrum import kernel_tasks
from group_of_one import join_group_of_one

import fulcrum

DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}
TOLERANCE = {torch.bfloat16: 2e-2, torch.float32: 1e-4}


def timed(step: Callable[[], None], device: torch.device, warmup: int, repeats: int) -> tuple[float, float]:
    """Median seconds of ``step`` (device-synchronised around each), and median seconds until it returned (the
    host's share: Python and kernel launches, when nothing in it waits for the device)."""
    times, host = [], []
    for i in range(warmup + repeats):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        step()
        queued = time.perf_counter()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        if i >= warmup:
            times.append(time.perf_counter() - start)
            host.append(queued - start)
    return statistics.median(times), statistics.median(host)


def count_syncs(step: Callable[[], None], device: torch.device) -> int | None:
    """Device-to-host synchronisations one run of ``step`` makes (torch.cuda's sync debug mode), None on CPU."""
    if device.type != "cuda":
        return None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            step()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return sum("synchroniz" in str(w.message) for w in caught)


def vslash_mask(length: int, sparsity: float, rng: random.Random) -> str:
    """MTraining's blockified vertical-slash mask (64-token blocks) over a ``length``-token document leaving out
    about ``sparsity`` of its causal pairs: block diagonals 0..7 and c more at random, 33c vertical columns at
    random, c found by bisection on the mask's exact pair count."""
    causal = length * (length + 1) // 2
    blocks = max(1, length // 64)
    seed = rng.random()  # one draw per document: every c below draws from the same stream, so density grows with c

    def mask(c: int) -> str:
        r = random.Random(seed)
        columns = sorted(r.sample(range(length), min(length, 33 * c)))
        offsets = sorted({*range(min(8, blocks)), *r.sample(range(blocks), min(blocks, c))})
        return f"vsblocks:64:{','.join(map(str, columns))}:{','.join(map(str, offsets))}"

    def density(text: str) -> float:
        return float(fulcrum.attention_pairs(fulcrum.Mask(text), [(0, length)], (0, length), length)) / causal

    low, high = 0, max(1, blocks)
    while low < high:  # the largest c whose mask keeps at most 1 - sparsity of the pairs
        mid = (low + high + 1) // 2
        if density(mask(mid)) <= 1.0 - sparsity:
            low = mid
        else:
            high = mid - 1
    return mask(low)


class OneVarlenCall(torch.autograd.Function):
    """One causal varlen FA2 call over every document, differentiable (the baseline row)."""

    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                kernels: VarlenKernels, call: FlashCall, cu: torch.Tensor) -> torch.Tensor:
        o, lse = kernels.forward(q, k, v, call, cu, cu, q.shape[-1] ** -0.5)
        ctx.save_for_backward(q, k, v, o, lse, cu)
        ctx.kernels, ctx.call = kernels, call  # type: ignore[attr-defined]
        return o

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, d_o: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        q, k, v, o, lse, cu = ctx.saved_tensors  # type: ignore[attr-defined]
        dq, dk, dv = ctx.kernels.backward(d_o.contiguous(), q, k, v, o, lse, ctx.call, cu, cu,  # type: ignore
                                          q.shape[-1] ** -0.5)
        return dq, dk, dv, None, None, None


def triton_tile_flops(step: ft.StepPlan) -> float:
    """FLOPs of the 64 x 64 tiles the Triton kernels compute for ``step``'s forward (every entry of its block
    tables, per q head), forward + backward as the pair count: what "FLOP/s on active tiles" counts."""
    plan = step._forward
    tiles = 0
    for i in plan.programs[0].instructions:
        items = getattr(i, "items", None)
        if items:
            buffers = plan.programs[0].buffers
            t = fulcrum._core.block_table(kernel_tasks(plan, items), plan.q_heads, buffers[i.q].rows,
                                          buffers[i.k].rows)
            heads = np.asarray(t["tile_head_end"]) - np.asarray(t["tile_head_begin"])
            tiles += int(heads[np.asarray(t["entry_tile"])].sum())
    return 3.5 * 4 * plan.head_dim * 64 * 64 * tiles


def main() -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", choices=("cuda", "cpu"))
    p.add_argument("--tokens", type=int, default=32768)
    p.add_argument("--dataset", default="pretrain")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dtype", default="bf16", choices=tuple(DTYPES))
    p.add_argument("--q-heads", type=int, default=32)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--planners", default="packed,distca")
    p.add_argument("--backends", help="fulcrum.torch backends to time (default: every one the device runs; the "
                                      "torch backend takes minutes at 128K tokens on a GPU)")
    p.add_argument("--mask", default="causal", help="every document's mask (fulcrum mask text)")
    p.add_argument("--vslash-sparsity", type=float, default=0.0,
                   help="instead of --mask: a blockified vertical-slash mask per document at this sparsity")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--json")
    args = p.parse_args()
    device, dtype = torch.device(args.device), DTYPES[args.dtype]

    join_group_of_one(device)

    model = fulcrum.ModelShape()
    model.name, model.layers, model.head_dim = "bench", 1, args.head_dim
    model.q_heads, model.kv_heads, model.hidden = args.q_heads, args.kv_heads, args.q_heads * args.head_dim
    model.ffn_hidden, model.dtype_bytes = 4 * model.hidden, 2 if dtype == torch.bfloat16 else 4
    b = fulcrum.BatchStream(fulcrum.make_length_source(args.dataset, args.seed, args.tokens), 1, args.tokens).next()
    lengths = [d.length for d in b.documents]
    rng = random.Random(args.seed)
    masks = [vslash_mask(n, args.vslash_sparsity, rng) if args.vslash_sparsity else args.mask for n in lengths]
    for d, mask in zip(b.documents, masks, strict=True):
        d.mask = fulcrum.Mask(mask)
    causal = all(m == "causal" for m in masks)
    pairs = sum(fulcrum.attention_pairs(d.mask, [(0, d.length)], (0, d.length), d.length) for d in b.documents)
    causal_pairs = sum(n * (n + 1) // 2 for n in lengths)
    # Forward 4 FLOPs per pair per head-dim element (QK^T and PV), backward 2.5x forward (the usual count).
    flops_per_pair = 3.5 * 4 * args.head_dim * args.q_heads
    flops = flops_per_pair * pairs

    g = torch.Generator(device="cpu").manual_seed(args.seed)
    q, k, v, d_o = (torch.randn(args.tokens, h, args.head_dim, generator=g).to(device, dtype)
                    for h in (args.q_heads, args.kv_heads, args.kv_heads, args.q_heads))

    Forward = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]

    def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        outs, start = [], 0
        for n in lengths:
            qi, ki, vi = (t[start : start + n].transpose(0, 1)[None] for t in (q, k, v))
            outs.append(F.scaled_dot_product_attention(qi, ki, vi, is_causal=True, enable_gqa=True)[0].transpose(0, 1))
            start += n
        return torch.cat(outs)

    def train_step(forward: Forward) -> Callable[[], None]:
        def step() -> None:
            forward(*(t.detach().requires_grad_() for t in (q, k, v))).backward(d_o)
        return step

    rows: list[dict] = []
    want: torch.Tensor | None = None
    if causal:
        with torch.no_grad():
            want = sdpa(q, k, v).float()
        seconds, host = timed(train_step(sdpa), device, args.warmup, args.repeats)
        rows.append({"name": "sdpa per document", "seconds": seconds, "host_seconds": host, "flops": flops})

    starts = [0]
    for n in lengths:
        starts.append(starts[-1] + n)
    one_call = FlashCall(CAUSAL, tuple((s, n) for s, n in zip(starts, lengths, strict=False)),
                         tuple((s, n) for s, n in zip(starts, lengths, strict=False)), tuple(starts), tuple(starts),
                         max(lengths), max(lengths))
    cu = torch.tensor(starts, dtype=torch.int32, device=device)

    def varlen(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        out = OneVarlenCall.apply(q, k, v, fa2_kernels(device), one_call, cu)
        assert isinstance(out, torch.Tensor)
        return out

    def checked_row(name: str, forward: Forward, work: float, *, check: bool = True) -> dict:
        """The row of ``forward`` (``work`` FLOPs a step): its output checked first (against SDPA's, else the first
        fulcrum row's, which becomes the reference), then timed."""
        nonlocal want
        with torch.no_grad():
            out = forward(q, k, v).float()
        error = None
        if check and want is None:
            want = out
        elif check:
            assert want is not None
            error = (out - want).abs().max().item() / max(1.0, want.abs().max().item())
            if not error <= TOLERANCE[dtype]:
                raise SystemExit(f"{name}: output differs from the reference's by {error:.2e}")
        seconds, host = timed(train_step(forward), device, args.warmup, args.repeats)
        return {"name": name, "seconds": seconds, "host_seconds": host, "error": error, "flops": work,
                "syncs": count_syncs(train_step(forward), device)}

    rows.append(checked_row("fa2 varlen, one call", varlen, flops_per_pair * causal_pairs, check=causal))
    if args.backends:
        backends = args.backends.split(",")
    elif device.type == "cpu":
        backends = ["fulcrum", "torch", "fa2"]
    else:
        backends = ["fa2", "triton", "torch", "flash"] if flash_available() else ["fa2", "triton", "torch"]
    for planner in args.planners.split(","):
        plan = fulcrum.make_planner(planner, fulcrum.PlannerOptions(model)).plan(b)
        step_plan = ft.compile_step(plan, model, dtype=dtype)
        for backend in backends:
            def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, step_plan: ft.StepPlan = step_plan,
                       backend: str = backend) -> torch.Tensor:
                out = ft.attention(q, k, v, step_plan, backend=backend)
                assert isinstance(out, torch.Tensor)
                return out
            row = checked_row(f"fulcrum {planner} {backend}", attend, flops)
            if backend == "triton":
                row["tile_flops"] = triton_tile_flops(step_plan)
            rows.append(row)
    dist.barrier()  # every rank done with the group: gloo's threads can abort one torn down under a peer
    dist.destroy_process_group()

    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    what = "causal" if causal else (f"vertical-slash at {1 - pairs / causal_pairs:.1%} sparsity"
                                    if args.vslash_sparsity else args.mask)
    print(f"{name}, torch {torch.__version__}, {args.dtype}, {len(lengths)} documents in {args.tokens} tokens "
          f"(longest {max(lengths)}), {what}, {args.q_heads}/{args.kv_heads} heads x {args.head_dim}; medians of "
          f"{args.repeats}, forward + backward")
    varlen_row = next(r for r in rows if r["name"].startswith("fa2 varlen"))
    print(f"{'':28s} {'ms':>9s} {'TFLOP/s':>8s} {'tiles':>8s} {'x varlen':>8s} {'host ms':>8s} {'syncs':>6s}")
    for r in rows:
        r["tflops"] = r["flops"] / r["seconds"] / 1e12
        r["tile_tflops"] = r["tile_flops"] / r["seconds"] / 1e12 if "tile_flops" in r else None
        r["vs_varlen"] = varlen_row["seconds"] / r["seconds"] * r["flops"] / varlen_row["flops"]
        tiles = f"{r['tile_tflops']:8.2f}" if r["tile_tflops"] is not None else f"{'':8s}"
        syncs = f"{r['syncs']:6d}" if r.get("syncs") is not None else f"{'':6s}"
        print(f"{r['name']:28s} {1e3 * r['seconds']:9.2f} {r['tflops']:8.2f} {tiles} {r['vs_varlen']:8.2f} "
              f"{1e3 * r['host_seconds']:8.2f} {syncs}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": name, "torch": torch.__version__, "args": vars(args), "lengths": lengths,
                       "masks": masks if not causal else "causal", "pairs": pairs, "causal_pairs": causal_pairs,
                       "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
