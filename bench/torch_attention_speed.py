#!/usr/bin/env python3
"""fulcrum.torch.attention's speed on one device beside torch's own attention, forward + backward.

One rank (a process group of one: NCCL on CUDA, gloo on CPU), so a plan moves nothing and this times the
executor and the kernel backend, not communication. The batch: document lengths drawn from ``--dataset`` (seed
``--seed``) packed into ``--tokens`` on one rank, as fulcrum.BatchStream packs them, causal, GQA ``--q-heads`` over
``--kv-heads`` of ``--head-dim``. Each row times q, k, v -> O, then O.backward(dO), device-synchronised:
- ``fulcrum <planner> <backend>``: fulcrum.torch.attention on ``compile_step(plan)``, every backend the device
  runs (torch, and flash where flash-attn is installed; fulcrum's C++ kernels on CPU);
- ``sdpa per document``: torch.nn.functional.scaled_dot_product_attention per document, is_causal, enable_gqa
  (the kernel torch picks: flash or memory-efficient on CUDA), what a user writes without Fulcrum;
- ``fa2 varlen, one call``: torch's FlashAttention-2 varlen op over all documents in one call (what
  ``torch.nn.attention.varlen.varlen_attn`` calls; on CPU, backend fa2's per-sequence route), the bar the
  ``fa2`` backend's overhead is measured against.
Medians over ``--repeats`` after ``--warmup``; the ratio is each row's median over SDPA's, measured in one run.
The outputs are checked against SDPA's (max |diff| / max |SDPA| ≤ 2e-2 in bf16, 1e-4 in fp32) before timing.

Usage: PYTHONPATH=build/release/python python3 bench/torch_attention_speed.py [--device cuda] [--tokens 32768]
       [--dtype bf16] [--planners packed,distca] [--repeats 10] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import time
from collections.abc import Callable
from datetime import timedelta

import fulcrum.torch as ft
import torch
import torch.distributed as dist
import torch.nn.functional as F
from fulcrum.torch.backend_fa2 import fa2_kernels
from fulcrum.torch.backend_flash import CAUSAL, FlashCall, VarlenKernels, flash_available

import fulcrum

DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}
TOLERANCE = {torch.bfloat16: 2e-2, torch.float32: 1e-4}


def timed(step: Callable[[], None], device: torch.device, warmup: int, repeats: int) -> float:
    """Median seconds of ``step`` (device-synchronised around each)."""
    times = []
    for i in range(warmup + repeats):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        if i >= warmup:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


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
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--json")
    args = p.parse_args()
    device, dtype = torch.device(args.device), DTYPES[args.dtype]

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=0, world_size=1, timeout=timedelta(seconds=120))

    model = fulcrum.ModelShape()
    model.name, model.layers, model.head_dim = "bench", 1, args.head_dim
    model.q_heads, model.kv_heads, model.hidden = args.q_heads, args.kv_heads, args.q_heads * args.head_dim
    model.ffn_hidden, model.dtype_bytes = 4 * model.hidden, 2 if dtype == torch.bfloat16 else 4
    b = fulcrum.BatchStream(fulcrum.make_length_source(args.dataset, args.seed, args.tokens), 1, args.tokens).next()
    lengths = [d.length for d in b.documents]
    pairs = sum(n * (n + 1) // 2 for n in lengths)
    # Forward 4 FLOPs per pair per head-dim element (QK^T and PV), backward 2.5x forward (the usual count).
    flops = 3.5 * 4 * pairs * args.head_dim * args.q_heads

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

    with torch.no_grad():
        want = sdpa(q, k, v).float()
    baseline = timed(train_step(sdpa), device, args.warmup, args.repeats)
    rows: list[dict] = [{"name": "sdpa per document", "seconds": baseline}]

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

    def checked_row(name: str, forward: Forward) -> dict:
        """The row of ``forward``: its output checked against SDPA's first, then timed."""
        with torch.no_grad():
            error = (forward(q, k, v).float() - want).abs().max().item() / max(1.0, want.abs().max().item())
        if not error <= TOLERANCE[dtype]:
            raise SystemExit(f"{name}: output differs from SDPA's by {error:.2e}")
        return {"name": name, "seconds": timed(train_step(forward), device, args.warmup, args.repeats), "error": error}

    rows.append(checked_row("fa2 varlen, one call", varlen))
    if args.backends:
        backends = args.backends.split(",")
    elif device.type == "cpu":
        backends = ["fulcrum", "torch", "fa2"]
    else:
        backends = ["fa2", "torch", "flash"] if flash_available() else ["fa2", "torch"]
    for planner in args.planners.split(","):
        plan = fulcrum.make_planner(planner, fulcrum.PlannerOptions(model)).plan(b)
        step_plan = ft.compile_step(plan, model, dtype=dtype)
        for backend in backends:
            def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, step_plan: ft.StepPlan = step_plan,
                       backend: str = backend) -> torch.Tensor:
                out = ft.attention(q, k, v, step_plan, backend=backend)
                assert isinstance(out, torch.Tensor)
                return out
            rows.append(checked_row(f"fulcrum {planner} {backend}", attend))
    dist.destroy_process_group()

    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"{name}, torch {torch.__version__}, {args.dtype}, {len(lengths)} documents in {args.tokens} tokens "
          f"(longest {max(lengths)}), {args.q_heads}/{args.kv_heads} heads x {args.head_dim}; medians of "
          f"{args.repeats}, forward + backward")
    print(f"{'':28s} {'ms':>9s} {'TFLOP/s':>8s} {'x sdpa':>7s}")
    for r in rows:
        r["tflops"], r["vs_sdpa"] = flops / r["seconds"] / 1e12, r["seconds"] / baseline
        print(f"{r['name']:28s} {1e3 * r['seconds']:9.2f} {r['tflops']:8.2f} {r['vs_sdpa']:7.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": name, "torch": torch.__version__, "args": vars(args), "lengths": lengths,
                       "flops": flops, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
