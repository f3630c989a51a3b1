#!/usr/bin/env python3
"""fulcrum.torch on a CUDA GPU: attention, one training step and process groups, against independent references.

Each line of the closing table is one check; (a), (b) and (c)'s staged runs decide the exit status (1 if any
fails); the NCCL probe in (c) is information.

(a) Attention: fulcrum.torch.attention forward and backward on a real torch.distributed group of one rank
    (NCCL on CUDA; gloo with --device cpu), on random varlen documents with GQA, for every planner that plans
    one rank, three mask sets (causal; mixed: lambda, full, per-head masks; sparse: vertical-slash,
    block-sparse, causal-blockwise, shared-question), backend "torch" in fp32 and bf16, "fa2" (torch's
    FlashAttention-2, the items it cannot mask on Fulcrum's Triton kernels) and "triton" in bf16 ("auto" for
    distca; pingpong mode, single-stream once), against masked softmax attention over whole documents computed
    here in fp64 on the same device (no fulcrum code). Per tensor (O, LSE, dQ, dK, dV): max |error| <= TOL *
    max(1, max |reference|), TOL = 1e-4 for fp32 and 2e-2 for bf16 (the CPU tests' 1e-5 and 1e-2, loosened
    for GPU reduction orders). Also: "auto" picks fa2 for CUDA bf16 and torch for fp32, and "fulcrum" (C++ CPU
    kernels) refuses CUDA tensors.
(b) Training: a tiny transformers LlamaForCausalLM trained one AdamW step (i) with attn_implementation=
    "fulcrum" under fulcrum.torch.hf.plan_context (planners packed and distca) and (ii) with its decoder
    layers run by fulcrum.torch.PingPong as two nano-batches planned by distca (both schedules), each against
    the same model with transformers' sdpa on the same documents as a padded batch: the loss (1e-5 relative),
    every parameter's gradient (max |diff| / max |ref| <= 1e-4) and the loss after the step (1e-5), in fp32.
(c) Several processes on one GPU, in subprocesses with a deadline each: NCCL with 2 ranks (information:
    expected to fail, two ranks on one device), then gloo with transport="staged" (CUDA tensors through pinned
    host memory) on 2 ranks (every mask set) and 4 (causal): (a)'s attention check for every planner with fa2,
    triton and torch (fp32, causal) on those ranks, real messages between processes.

On one rank the plans send nothing (every Program's traffic is rank-local), so (a) and (b) check the
executor, the kernels and autograd on the device, and NCCL's group set-up, not NCCL's P2P; (c) is where
messages between ranks run. With --device cpu everything runs on CPU over gloo (a dry run of this script's
logic; the Triton kernels then need TRITON_INTERPRET=1, else their cases are skipped and say so).

Usage (the module built, e.g. PYTHONPATH=build/dev/python; sized to finish within 4 minutes on one H100/H200):
    python3 bench/gpu_torch_check.py [--device cuda|cpu] [--tokens 3072] [--skip-multi] [--multi-timeout 120]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import socket
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import fulcrum.torch as ft
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from fulcrum.torch.backend_flash import flash_available
from fulcrum.torch.backend_triton import triton_runs
from fulcrum.torch.backends import select_backend
from fulcrum.torch.packed import PackedRows
from fulcrum.torch.program import Launch
from torch import nn

import fulcrum

# The tests' own helper: striped layouts take documents of whole stripes.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python" / "tests"))
from conftest import whole_stripes

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python" / "examples"))
import llama_model
import train_llama

# ---- (a) attention: shapes, masks, planners ----
Q_HEADS, KV_HEADS, HEAD_DIM = 8, 2, 64
TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 2e-2}
DTYPE_NAMES = {torch.float32: "fp32", torch.bfloat16: "bf16"}
# As python/tests/test_torch_attention.py: options that make small batches move work.
HEAD_SPLIT = "dcp+head-blocks"
PLANNER_OPTIONS: dict[str, dict[str, Any]] = {"distca": {"granularity": 16, "tolerance": 0.05},
                                              "dcp": {"dcp_block": 32}, "wlb": {"cp_degree": 2},
                                              HEAD_SPLIT: {"dcp_block": 32, "dcp_head_blocks": 2}}
HEAD_MASKS = ("causal", "window:64", "lambda:4:48", "causal", "full", "causal", "window:16", "causal")
# Index-list masks sized for documents of any length (columns and blocks past a document's end see nothing).
VSLASH = "vslash:" + ",".join(str(c) for c in range(3, 4096, 37)) + ":0,1,2,64,300,1000"
BLOCKSPARSE = "blocksparse:64:" + ",".join(f"{qb}-{kb}" for qb in range(64) for kb in range(qb + 1)
                                          if kb in (0, qb) or (qb * 7 + kb * 3) % 5 == 0)
MASK_SETS = {"causal": ("causal",), "mixed": ("lambda:16:128", "full", "causal+head-masks"),
             "sparse": (VSLASH, BLOCKSPARSE, "blockwise:128:1", "shared-question:3:25")}

# ---- (b) training ----
LOSS_RTOL, GRADIENT_RTOL = 1e-5, 1e-4
HF_CONFIG = llama_model.LlamaConfig(vocab_size=256, hidden=128, layers=2, q_heads=4, kv_heads=2, head_dim=32,
                                    ffn_hidden=256, tie_embeddings=False)
DATA_SEED = 0


@dataclass
class Result:
    part: str  # a, b or c
    name: str
    status: str  # PASS, FAIL, SKIP or INFO
    detail: str
    seconds: float


RESULTS: list[Result] = []


def record(part: str, name: str, status: str, detail: str, seconds: float) -> None:
    RESULTS.append(Result(part, name, status, detail, seconds))
    print(f"({part}) {status:4s} {name}: {detail} [{seconds:.2f} s]", flush=True)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def init_group(backend: str, rank: int, world: int, port: int, timeout_s: float) -> None:
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # loopback: container hostnames may not resolve
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=timeout_s))


# ---- (a) attention against fp64 ----


def model_shape() -> fulcrum.ModelShape:
    m = fulcrum.ModelShape()
    m.name, m.layers, m.hidden, m.ffn_hidden = "gpu-check", 1, Q_HEADS * HEAD_DIM, 4 * Q_HEADS * HEAD_DIM
    m.q_heads, m.kv_heads, m.head_dim, m.dtype_bytes = Q_HEADS, KV_HEADS, HEAD_DIM, 4
    return m


def make_batch(ranks: int, tokens_per_rank: int, masks: tuple[str, ...], seed: int) -> fulcrum.Batch:
    """Short, medium and long documents in random order, filling the ranks' budgets: imbalanced causal work."""
    rng = random.Random(seed)
    total, lengths = ranks * tokens_per_rank, list[int]()
    longest = max(400, tokens_per_rank // 2)
    while sum(lengths) < total:
        length = rng.choice([rng.randint(5, 60), rng.randint(100, 380), rng.randint(400, longest)])
        lengths.append(min(length, total - sum(lengths)))
    docs = []
    for i, length in enumerate(lengths):
        spec = masks[i % len(masks)]
        doc = fulcrum.Document(i, length, "causal" if spec == "causal+head-masks" else spec)
        if spec == "causal+head-masks":
            doc.head_masks = [fulcrum.Mask(m) for m in HEAD_MASKS]
        docs.append(doc)
    return fulcrum.pack_batch(docs, ranks, tokens_per_rank)


def allowed(spec: str, n: int, device: torch.device) -> torch.Tensor:
    """The mask as a [query, key] boolean matrix over a whole document, from the masks' definitions."""
    q, k = torch.arange(n, device=device)[:, None], torch.arange(n, device=device)[None, :]
    kind, *params = spec.split(":", 3 if spec.startswith("striped:") else -1)
    if kind == "striped":  # stored permuted: slot p holds position source[p] (block-striped over W ranks)
        ranks, block, inner = int(params[0]), int(params[1]), params[2]
        slots = torch.arange(n, device=device)
        local = slots % (n // ranks)
        source = ((local // block) * ranks + slots // (n // ranks)) * block + local % block
        return allowed(inner, n, device)[source][:, source]
    if kind == "full":
        return torch.ones(n, n, dtype=torch.bool, device=device)
    if kind == "causal":
        return k <= q
    if kind == "window":
        return (k <= q) & (k > q - int(params[0]))
    if kind == "lambda":
        return (k <= q) & ((k < int(params[0])) | (k > q - int(params[1])))
    if kind == "vslash":  # row q sees columns v <= q and keys q - s
        columns = torch.tensor([int(c) for c in params[0].split(",") if c], dtype=torch.int64, device=device)
        slashes = torch.tensor([int(c) for c in params[1].split(",") if c], dtype=torch.int64, device=device)
        return (k <= q) & (torch.isin(k, columns) | torch.isin(q - k, slashes))
    if kind == "blocksparse":  # (q, k) visible iff its (q / B, k / B) is listed and k <= q
        block = int(params[0])
        listed = torch.zeros(n // block + 1, n // block + 1, dtype=torch.bool, device=device)
        for pair in params[1].split(","):
            qb, kb = (int(x) for x in pair.split("-"))
            if qb < listed.shape[0] and kb < listed.shape[1]:
                listed[qb, kb] = True
        return (k <= q) & listed[q // block, k // block]
    if kind == "blockwise":  # block j's rows: the first block, blocks j - W .. j up to itself; the last block all
        block, back = int(params[0]), int(params[1])
        qb, kb, last = q // block, k // block, (n - 1) // block
        return (k <= q) & ((kb == 0) | (kb >= qb - back) | (qb == last))
    if kind == "shared-question":  # a causal question, then answers that see it and themselves
        answers, percent = int(params[0]), int(params[1])
        question = max(1, n * percent // 100)
        length = (n - question) // answers if answers else 0
        part = torch.where(torch.arange(n, device=device) < question, -1,
                           torch.clamp((torch.arange(n, device=device) - question) // max(1, length), max=answers - 1))
        qp, kp = part[:, None], part[None, :]
        return (k <= q) & ((kp == -1) | (kp == qp))
    raise AssertionError(f"no reference mask for '{spec}'")


def document_data(doc: fulcrum.Document, dtype: torch.dtype, device: torch.device) -> list[torch.Tensor]:
    """q, k, v, dO of a whole document, from its id: values of ``dtype`` held in fp64 on ``device``."""
    g = torch.Generator().manual_seed(1000 + doc.id)
    return [torch.randn(doc.length, h, HEAD_DIM, generator=g, dtype=torch.float64).to(dtype).double().to(device)
            for h in (Q_HEADS, KV_HEADS, KV_HEADS, Q_HEADS)]


def reference(doc: fulcrum.Document, data: list[torch.Tensor]) -> list[torch.Tensor]:
    """O, LSE [rows, heads], dQ, dK, dV of plain masked softmax attention over the whole document, in fp64."""
    q, k, v = (t.clone().requires_grad_() for t in data[:3])
    n, group, device = q.shape[0], Q_HEADS // KV_HEADS, q.device
    specs = [str(m) for m in doc.head_masks] or [str(doc.mask)] * Q_HEADS
    mask = torch.stack([allowed(s, n, device) for s in specs])  # [heads, q, k]
    scores = torch.einsum("qhd,khd->hqk", q, k.repeat_interleave(group, 1)) / math.sqrt(HEAD_DIM)
    scores = scores.masked_fill(~mask, -math.inf)
    o = torch.einsum("hqk,khd->qhd", torch.softmax(scores, dim=-1), v.repeat_interleave(group, 1))
    (o * data[3]).sum().backward()
    assert q.grad is not None and k.grad is not None and v.grad is not None
    return [o.detach(), torch.logsumexp(scores, dim=-1).detach().T, q.grad, k.grad, v.grad]


@dataclass(frozen=True)
class Case:
    mask_set: str
    planner: str
    backend: str
    mode: str
    dtype: torch.dtype
    transport: str = "direct"

    @property
    def name(self) -> str:
        return (f"{self.planner}/{self.mask_set}/{self.backend}/{self.mode}/{DTYPE_NAMES[self.dtype]}"
                + ("" if self.transport == "direct" else f"/{self.transport}"))


def attention_cases(planners: tuple[str, ...], extras: bool, transport: str = "direct",
                    mask_sets: tuple[str, ...] = tuple(MASK_SETS)) -> list[Case]:
    """Every planner per mask set with fa2 (torch's built-in FlashAttention-2) and triton (Fulcrum's kernels) in
    bf16, and backend torch: in fp32 and bf16 on one rank (``extras``: also auto and single-stream for distca),
    in fp32 on the causal set over several processes (it builds mask matrices on the host: slow)."""
    out = []
    for mask_set in mask_sets:
        out += [Case(mask_set, p, b, "pingpong", torch.bfloat16, transport)
                for p in planners for b in ("fa2", "triton")]
        if extras:
            out += [Case(mask_set, p, "torch", "pingpong", d) for p in planners for d in TOLERANCE]
            out += [Case(mask_set, "distca", "auto", "pingpong", d) for d in TOLERANCE]
            out.append(Case(mask_set, "distca", "torch", "single-stream", torch.float32))
        elif mask_set == "causal":
            out += [Case(mask_set, p, "torch", "pingpong", torch.float32, transport) for p in planners]
    return out


def launches(step: ft.StepPlan, rank: int) -> tuple[int, int]:
    """(launches, transfers) in rank ``rank``'s forward and backward Programs: the traffic the run posts."""
    n = t = 0
    for plan in (step._forward, step._backward):
        for i in plan.programs[rank].instructions:
            if isinstance(i, Launch):
                n, t = n + 1, t + len(i.transfers)
    return n, t


def run_attention_case(case: Case, rank: int, batches: dict[str, fulcrum.Batch], device: torch.device,
                       references: dict[Any, list[torch.Tensor]]) -> tuple[str, str, dict[str, float]]:
    """One planner's StepPlan forward and backward on this rank of the default group, against fp64.
    Returns (status, detail, relative error per tensor)."""
    options = fulcrum.PlannerOptions(model_shape(), **PLANNER_OPTIONS.get(case.planner, {}))
    made = fulcrum.make_planner(case.planner.split("+")[0], options)
    try:
        assignment = made.plan(whole_stripes(made, batches[case.mask_set]))
        step = ft.compile_step(assignment, model_shape(), mode=case.mode, dtype=case.dtype)
    except fulcrum.InputError as e:  # e.g. a planner that needs more ranks than the group has
        return "SKIP", f"not planned: {e}", {}
    docs = assignment.batch.documents
    data, want = {}, {}
    for i, d in enumerate(docs):
        key = (d.id, d.length, str(d.mask), tuple(str(m) for m in d.head_masks), case.dtype)
        data[i] = document_data(d, case.dtype, device)
        if key not in references:
            references[key] = reference(d, data[i])
        want[i] = references[key]

    def rows(source: dict[int, list[torch.Tensor]], index: int) -> torch.Tensor:
        parts = [source[o.doc][index][o.begin : o.end] for o in step.owned(rank)]
        return torch.cat(parts) if parts else source[0][index][:0]

    try:
        select_backend(case.backend, device, case.dtype)
    except fulcrum.InputError as e:  # e.g. triton on CPU without TRITON_INTERPRET=1: said, not hidden
        return "SKIP", f"backend cannot run here: {e}", {}
    q, k, v = (rows(data, f).to(case.dtype).requires_grad_() for f in range(3))
    out = ft.attention(q, k, v, step, backend=case.backend, return_lse=True, transport=case.transport)
    assert isinstance(out, tuple)
    o, lse = out
    (o * rows(data, 3).to(case.dtype)).sum().backward()
    sync(device)
    errors: dict[str, float] = {}
    problems = []
    for name, got, field in (("o", o, 0), ("lse", lse.T, 1), ("dq", q.grad, 2), ("dk", k.grad, 3),
                             ("dv", v.grad, 4)):
        assert got is not None
        ref = rows(want, field)
        expected_dtype = torch.float32 if name == "lse" else case.dtype
        if got.dtype != expected_dtype or got.device != device:
            problems.append(f"{name} is {got.dtype} on {got.device}, not {expected_dtype} on {device}")
        error = (got.double() - ref).abs().max().item() if ref.numel() else 0.0
        scale = max(1.0, ref.abs().max().item() if ref.numel() else 0.0)
        errors[name] = error / scale
        if not error <= TOLERANCE[case.dtype] * scale:  # NaN fails too
            problems.append(f"{name} |error| {error:.2e} > {TOLERANCE[case.dtype] * scale:.2e}")
    n_launch, n_transfer = launches(step, rank)
    detail = (" ".join(f"{name} {e:.1e}" for name, e in errors.items()) + f" (tol {TOLERANCE[case.dtype]:.0e}; "
              f"{step.rows(rank)} rows, {len(docs)} docs, {n_launch} launches/{n_transfer} transfers)")
    if problems:
        return "FAIL", "; ".join(problems) + " | " + detail, errors
    return "PASS", detail, errors


def check_attention(device: torch.device, rank: int, world: int, tokens: int, planners: tuple[str, ...],
                    extras: bool, report: Callable[[str, str, str, float], None], transport: str = "direct",
                    mask_sets: tuple[str, ...] = tuple(MASK_SETS)) -> None:
    batches = {name: make_batch(world, tokens, masks, seed=world * 10 + len(name)) for name, masks in MASK_SETS.items()}
    references: dict[Any, list[torch.Tensor]] = {}
    worst: dict[torch.dtype, float] = dict.fromkeys(TOLERANCE, 0.0)
    for case in attention_cases(planners, extras, transport, mask_sets):
        start = time.perf_counter()
        try:
            status, detail, errors = run_attention_case(case, rank, batches, device, references)
            worst[case.dtype] = max([worst[case.dtype], *errors.values()])
        except Exception as e:  # a crash is a failure of this case; the others still run
            status, detail = "FAIL", f"{type(e).__name__}: {e} | {traceback.format_exc(limit=-3).strip()}"
        report(f"attention {world} rank(s) {case.name}", status, detail, time.perf_counter() - start)
    report(f"attention {world} rank(s) worst relative error", "INFO",
           ", ".join(f"{DTYPE_NAMES[d]} {e:.2e} (tol {TOLERANCE[d]:.0e})" for d, e in worst.items()), 0.0)


def triton_version() -> str:
    try:
        import triton

        return str(triton.__version__)
    except ImportError:
        return "not installed"


def check_backend_choice(device: torch.device) -> None:
    """"auto" on this device, and "fulcrum" refusing CUDA tensors."""
    start = time.perf_counter()
    for dtype in TOLERANCE:
        got = select_backend("auto", device, dtype).name
        if device.type == "cpu":
            want = "fulcrum"
        else:
            want = "fa2" if dtype == torch.bfloat16 else "torch"
        record("a", f"backend auto on {device.type} {DTYPE_NAMES[dtype]}", "PASS" if got == want else "FAIL",
               f"picks {got} (expected {want})", time.perf_counter() - start)
    if device.type == "cuda":
        start = time.perf_counter()
        compiled = triton_runs(device, torch.bfloat16)
        record("a", "triton kernels compiled for the GPU", "PASS" if compiled else "FAIL",
               f"TRITON_INTERPRET={os.environ.get('TRITON_INTERPRET')}, triton {triton_version()}",
               time.perf_counter() - start)
        start = time.perf_counter()
        try:
            select_backend("fulcrum", device, torch.float32)
            record("a", "backend fulcrum refuses CUDA", "FAIL", "accepted CUDA tensors", time.perf_counter() - start)
        except fulcrum.InputError as e:
            record("a", "backend fulcrum refuses CUDA", "PASS", f"InputError: {e}", time.perf_counter() - start)


# ---- (b) one training step of a tiny transformers Llama against sdpa ----


def hf_model(attn_implementation: str, max_positions: int, device: torch.device) -> nn.Module:
    import transformers

    torch.manual_seed(DATA_SEED)  # the same initial weights for every model built here
    config: Any = train_llama.hf_config(HF_CONFIG, max_positions, attn_implementation)
    model: nn.Module = transformers.LlamaForCausalLM(config)
    return model.to(device)


def padded_loss(model: nn.Module, rows: PackedRows, tokens: torch.Tensor, labels: torch.Tensor,
                count: int) -> torch.Tensor:
    """The mean loss of the rows' documents as a right-padded batch (one sequence per document), through the
    model's own attention (sdpa): the baseline. Each document must be one whole piece."""
    lengths = [p.end - p.begin for p in rows.pieces]
    assert all(p.begin == 0 and p.end == rows.doc_lengths[p.doc] for p in rows.pieces), "documents must be whole"
    ids = torch.zeros(len(lengths), max(lengths), dtype=torch.int64, device=tokens.device)
    padded_labels = torch.full_like(ids, llama_model.IGNORE)
    mask = torch.zeros_like(ids)
    for i, p in enumerate(rows.pieces):
        n = lengths[i]
        ids[i, :n], padded_labels[i, :n], mask[i, :n] = tokens[p.row : p.row + n], labels[p.row : p.row + n], 1
    logits = model(input_ids=ids, attention_mask=mask, use_cache=False).logits
    return llama_model.token_loss_sum(logits.reshape(-1, HF_CONFIG.vocab_size), padded_labels.reshape(-1)) / count


def compare_models(got: nn.Module, want: nn.Module) -> tuple[float, str]:
    """The largest per-parameter gradient error max |diff| / max |ref|, and which parameter has it."""
    worst, where = 0.0, ""
    want_params = dict(want.named_parameters())
    for name, p in got.named_parameters():
        ref = want_params[name].grad
        if p.grad is None or ref is None:
            return math.inf, f"{name}: no gradient"
        error = (p.grad.double() - ref.double()).abs().max().item() / max(ref.abs().max().item(), 1e-30)
        if not error <= worst:
            worst, where = error, name
    return worst, where


def train_and_compare(name: str, model: nn.Module, baseline: nn.Module, loss_of: Callable[[], torch.Tensor],
                      baseline_loss_of: Callable[[], torch.Tensor], device: torch.device) -> None:
    """One AdamW step of both models from the same weights: loss, gradients, loss after the step."""
    start = time.perf_counter()
    try:
        optimizers = [torch.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=0.0) for m in (model, baseline)]
        losses = []
        for optimizer, loss_fn in zip(optimizers, (loss_of, baseline_loss_of), strict=True):
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn()
            loss.backward()
            losses.append(loss.item())
        gradient_error, where = compare_models(model, baseline)
        for optimizer in optimizers:
            optimizer.step()
        with torch.no_grad():
            after = [loss_of().item(), baseline_loss_of().item()]
        sync(device)
        loss_error = abs(losses[0] - losses[1]) / abs(losses[1])
        after_error = abs(after[0] - after[1]) / abs(after[1])
        ok = loss_error <= LOSS_RTOL and gradient_error <= GRADIENT_RTOL and after_error <= LOSS_RTOL
        detail = (f"loss {losses[0]:.6f} vs {losses[1]:.6f} (rel {loss_error:.1e}), gradients rel {gradient_error:.1e} "
                  f"(worst {where}), after the step {after[0]:.6f} vs {after[1]:.6f} (rel {after_error:.1e}); "
                  f"tol loss {LOSS_RTOL:.0e}, gradients {GRADIENT_RTOL:.0e}")
        record("b", name, "PASS" if ok else "FAIL", detail, time.perf_counter() - start)
    except Exception as e:
        record("b", name, "FAIL", f"{type(e).__name__}: {e} | {traceback.format_exc(limit=-3).strip()}",
               time.perf_counter() - start)


def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """transformers' rotate-half RoPE on [rows, heads, head_dim] with cos, sin [rows, head_dim]."""
    half = x.shape[-1] // 2
    return x * cos[:, None] + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin[:, None]


class HFLayer(nn.Module):
    """transformers' LlamaDecoderLayer cut at attention (fulcrum.torch.PingPongLayer): the same modules and
    math as its forward, attention left to PingPong. context = (cos, sin) of the nano-batch's rows."""

    def __init__(self, layer: Any) -> None:  # a LlamaDecoderLayer
        super().__init__()
        self.layer = layer

    def pre_attention(self, x: torch.Tensor, context: tuple[torch.Tensor, torch.Tensor]) -> tuple[Any, ...]:
        a, rows, c = self.layer.self_attn, x.shape[0], HF_CONFIG
        h = self.layer.input_layernorm(x)
        q = rope(a.q_proj(h).view(rows, c.q_heads, c.head_dim), *context)
        k = rope(a.k_proj(h).view(rows, c.kv_heads, c.head_dim), *context)
        return q.contiguous(), k.contiguous(), a.v_proj(h).view(rows, c.kv_heads, c.head_dim).contiguous(), x

    def post_attention(self, o: torch.Tensor, x: torch.Tensor, context: Any) -> torch.Tensor:
        x = x + self.layer.self_attn.o_proj(o.flatten(1))
        return x + self.layer.mlp(self.layer.post_attention_layernorm(x))


def check_training(device: torch.device, tokens: int, backend: str) -> None:
    import fulcrum.torch.hf as fhf

    shape = train_llama.model_shape(HF_CONFIG)
    stream = fulcrum.BatchStream(fulcrum.make_length_source("uniform:16:400", seed=4, tokens_per_rank=tokens), 1,
                                 tokens)
    batch = next(stream)

    # (i) attn_implementation="fulcrum": fulcrum.torch.attention inside the model, over a compiled plan.
    for planner in ("packed", "distca"):
        options = fulcrum.PlannerOptions(shape, **PLANNER_OPTIONS.get(planner, {}))
        assignment = fulcrum.make_planner(planner, options).plan(batch)
        step = ft.compile_step(assignment, shape)
        rows = PackedRows.from_step(step, 0)
        ids, labels = (t.to(device) for t in train_llama.rank_inputs(assignment.batch, rows, HF_CONFIG.vocab_size,
                                                                     DATA_SEED))
        count = train_llama.labelled_rows(assignment.batch)
        positions = rows.positions(device)[None]
        model, baseline = hf_model(fhf.NAME, tokens, device), hf_model("sdpa", tokens, device)
        baseline.load_state_dict(model.state_dict())

        def fulcrum_loss(model: nn.Module = model, step: ft.StepPlan = step, ids: torch.Tensor = ids,
                         labels: torch.Tensor = labels, positions: torch.Tensor = positions,
                         count: int = count) -> torch.Tensor:
            with fhf.plan_context(step, backend=backend):
                logits = model(input_ids=ids[None], position_ids=positions, use_cache=False).logits
            return llama_model.token_loss_sum(logits[0], labels) / count

        def sdpa_loss(baseline: nn.Module = baseline, rows: PackedRows = rows, ids: torch.Tensor = ids,
                      labels: torch.Tensor = labels, count: int = count) -> torch.Tensor:
            return padded_loss(baseline, rows, ids, labels, count)

        train_and_compare(f"hf attn_implementation=fulcrum, {planner}, {len(assignment.batch.documents)} docs, "
                          f"{rows.rows} rows vs sdpa", model, baseline, fulcrum_loss, sdpa_loss, device)

    # (ii) PingPong over the decoder layers: two nano-batches (distca), both schedules.
    rows = PackedRows.from_batch(batch, 0)
    cu = [0]
    for p in rows.pieces:
        cu.append(cu[-1] + p.end - p.begin)
    distca = fulcrum.make_planner("distca", fulcrum.PlannerOptions(shape, **PLANNER_OPTIONS["distca"]))
    steps = ft.plan_nano_batches(distca, [cu], shape)
    nano_rows = [PackedRows.from_step(s, 0) for s in steps]
    ids, labels = (t.to(device) for t in train_llama.rank_inputs(batch, rows, HF_CONFIG.vocab_size, DATA_SEED))
    count = train_llama.labelled_rows(batch)
    if not torch.equal(torch.cat([r.positions() for r in nano_rows]), rows.positions()):
        record("b", "pingpong rows", "FAIL", "the nano-batches' rows are not the micro-batch's in order", 0.0)
        return
    for schedule in ft.SCHEDULES:
        model, baseline = hf_model("sdpa", tokens, device), hf_model("sdpa", tokens, device)
        baseline.load_state_dict(model.state_dict())
        inner: Any = model.model
        pingpong = ft.PingPong([HFLayer(layer) for layer in inner.layers], backend=backend)

        def pingpong_loss(inner: Any = inner, model: Any = model, pingpong: ft.PingPong = pingpong,
                          schedule: str = schedule) -> torch.Tensor:
            x = inner.embed_tokens(ids)
            contexts = []
            for part, r in zip(torch.split(x, [r.rows for r in nano_rows]), nano_rows, strict=True):
                cos, sin = inner.rotary_emb(part[None], r.positions(device)[None])
                contexts.append((cos[0], sin[0]))
            y = pingpong(x, steps, (contexts[0], contexts[1]), schedule=schedule)
            logits = model.lm_head(inner.norm(y))
            return llama_model.token_loss_sum(logits, labels) / count

        def padded_sdpa_loss(baseline: nn.Module = baseline) -> torch.Tensor:
            return padded_loss(baseline, rows, ids, labels, count)

        train_and_compare(f"hf layers under PingPong ({schedule}), distca nano-batches {nano_rows[0].rows}+"
                          f"{nano_rows[1].rows} rows vs sdpa", model, baseline, pingpong_loss, padded_sdpa_loss, device)


# ---- (c) several ranks on one GPU, in subprocesses ----


def _rank_main(rank: int, world: int, port: int, backend: str, device_type: str, tokens: int, timeout_s: float,
               out_dir: str, transport: str, mask_sets: tuple[str, ...]) -> None:
    """One rank of (c): the group, a probe of its collectives and P2P (of the tensors the transport sends: host
    memory when staged), then the attention check. Its progress is saved after every stage and case, so a rank
    killed at the deadline still reports."""
    result: dict[str, Any] = {"rank": rank, "stage": "init", "attention": []}

    def save() -> None:
        path = os.path.join(out_dir, f"rank{rank}.json")
        with open(path + ".tmp", "w") as f:
            json.dump(result, f)
        os.replace(path + ".tmp", path)

    try:
        save()
        device = torch.device("cuda", 0) if device_type == "cuda" else torch.device("cpu")
        if device.type == "cuda":
            torch.cuda.set_device(device)
        init_group(backend, rank, world, port, timeout_s)
        result["stage"] = "all_reduce"
        save()
        t = torch.full((4,), float(rank + 1), device=device)
        dist.all_reduce(t)
        sync(device)
        result["all_reduce"] = t.tolist() == [world * (world + 1) / 2] * 4
        result["stage"] = "batch_isend_irecv"
        save()
        peer = (rank + 1) % world
        source = (rank - 1) % world
        wire = torch.device("cpu") if transport == "staged" else device
        send = torch.arange(1000, dtype=torch.float32, device=wire) + 10000 * rank
        received = torch.zeros(1000, dtype=torch.float32, device=wire)
        works = dist.batch_isend_irecv([dist.P2POp(dist.isend, send, peer), dist.P2POp(dist.irecv, received, source)])
        for work in works:
            work.wait()
        sync(device)
        result["p2p"] = torch.equal(received.cpu(), torch.arange(1000, dtype=torch.float32) + 10000 * source)
        if result["all_reduce"] and result["p2p"]:
            result["stage"] = "attention"
            save()

            def collect(name: str, status: str, detail: str, seconds: float) -> None:
                result["attention"].append([name, status, detail, seconds])
                save()

            planners = (*fulcrum.planner_names(), HEAD_SPLIT)
            check_attention(device, rank, world, tokens, planners, False, collect, transport, mask_sets)
        result["stage"] = "done"
    except BaseException as e:
        result["error"] = f"{type(e).__name__}: {e}"
        result["traceback"] = traceback.format_exc(limit=-4)
    save()
    try:
        if dist.is_initialized():
            dist.destroy_process_group()
    except Exception:
        pass


def try_ranks(backend: str, device: torch.device, tokens: int, deadline_s: float, world: int,
              transport: str = "direct", mask_sets: tuple[str, ...] = tuple(MASK_SETS)) -> None:
    """Spawns ``world`` ranks of ``backend`` on this device and reports what worked. The direct transport is a
    probe (INFO rows, never FAIL: NCCL refuses two ranks on one device); the staged one's attention cases are
    checks (PASS/FAIL), and a rank that does not reach the end fails."""
    start = time.perf_counter()
    checked = transport == "staged"
    label = f"{world} ranks, {backend}, {device.type} tensors, transport {transport}"
    ctx = mp.get_context("spawn")
    with tempfile.TemporaryDirectory() as out_dir:
        args = (world, free_port(), backend, device.type, tokens, min(60.0, deadline_s / 2), out_dir, transport,
                mask_sets)
        procs = [ctx.Process(target=_rank_main, args=(rank, *args), daemon=True) for rank in range(world)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(max(0.1, deadline_s - (time.perf_counter() - start)))
        timed_out = [r for r, p in enumerate(procs) if p.is_alive()]
        for p in procs:
            if p.is_alive():
                p.terminate()
                p.join(5)
            if p.is_alive():
                p.kill()
                p.join(5)
        results = {}
        for rank in range(world):
            path = Path(out_dir) / f"rank{rank}.json"
            if path.exists():
                results[rank] = json.loads(path.read_text())
    seconds = time.perf_counter() - start
    exits = [p.exitcode for p in procs]
    summary = [f"exit codes {exits}" + (f", killed after {deadline_s:.0f} s: ranks {timed_out}" if timed_out else "")]
    for rank in range(world):
        r = results.get(rank)
        if r is None:
            summary.append(f"rank {rank}: no result (crashed or killed)")
            continue
        state = f"rank {rank}: reached {r['stage']}, all_reduce {r.get('all_reduce')}, p2p {r.get('p2p')}"
        if "error" in r:
            state += f", error: {r['error'][:600]}"
        summary.append(state)
    reached = all(results.get(rank, {}).get("stage") == "done" for rank in range(world))
    record("c", label, ("PASS" if reached else "FAIL") if checked else "INFO", "; ".join(summary), seconds)
    per_case: dict[str, list[tuple[int, str, str, float]]] = {}  # case -> each rank's (rank, status, detail, s)
    for rank, r in sorted(results.items()):
        if "traceback" in r:
            print(f"    rank {rank} traceback (last frames):\n" + "\n".join(
                "      " + line for line in r["traceback"].strip().splitlines()[-12:]), flush=True)
        for name, status, detail, case_s in r.get("attention", []):
            per_case.setdefault(name, []).append((rank, status, detail, case_s))
    for name, entries in per_case.items():
        statuses = [status for _, status, _, _ in entries]
        ok = len(entries) == world and all(status in ("PASS", "SKIP", "INFO") for status in statuses)
        detail = f"ranks {'/'.join(statuses)} | " + " | ".join(f"rank {rank}: {d}" for rank, _, d, _ in entries)
        status = ("PASS" if ok else "FAIL") if checked else ("INFO" if ok else "INFO-FAIL")
        record("c", f"{backend}: {name}", status, detail, max(e[3] for e in entries))


# ---- main ----


def environment(device: torch.device) -> str:
    lines = [f"torch {torch.__version__} (CUDA {torch.version.cuda}), python {sys.version.split()[0]}, "
             f"fulcrum planners: {', '.join(fulcrum.planner_names())}",
             f"float32 matmul precision: {torch.get_float32_matmul_precision()}; flash-attn: {flash_available()}; "
             f"triton {triton_version()} (TRITON_INTERPRET={os.environ.get('TRITON_INTERPRET')})"]
    if device.type == "cuda":
        p = torch.cuda.get_device_properties(device)
        lines.append(f"GPU: {p.name}, {p.total_memory / 2**30:.0f} GiB, capability {p.major}.{p.minor}, "
                     f"{torch.cuda.device_count()} device(s), NCCL {torch.cuda.nccl.version()}")
    return "\n".join(lines)


def check_one_rank(device: torch.device, tokens: int, train_tokens: int) -> None:
    """(a) and (b) on the group of one rank this process has joined."""
    print(f"\n== (a) attention, 1 rank, {tokens} tokens, {Q_HEADS} q heads over {KV_HEADS} kv heads x {HEAD_DIM}",
          flush=True)
    check_backend_choice(device)
    section = time.perf_counter()
    planners = (*fulcrum.planner_names(), HEAD_SPLIT)

    def report_a(name: str, status: str, detail: str, seconds: float) -> None:
        record("a", name, status, detail, seconds)

    try:
        check_attention(device, 0, 1, tokens, planners, True, report_a)
    except Exception as e:
        record("a", "attention set-up", "FAIL", f"{type(e).__name__}: {e} | {traceback.format_exc(limit=-3).strip()}",
               time.perf_counter() - section)
    print(f"(a) took {time.perf_counter() - section:.1f} s", flush=True)

    print(f"\n== (b) one training step of a tiny transformers Llama, {train_tokens} tokens", flush=True)
    section = time.perf_counter()
    try:
        check_training(device, train_tokens, "auto")
    except Exception as e:
        record("b", "training set-up", "FAIL", f"{type(e).__name__}: {e} | {traceback.format_exc(limit=-3).strip()}",
               time.perf_counter() - section)
    print(f"(b) took {time.perf_counter() - section:.1f} s", flush=True)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"),
                   help="cuda: NCCL group and CUDA tensors; cpu: gloo and CPU tensors (a dry run)")
    p.add_argument("--tokens", type=int, default=0,
                   help="tokens of (a)'s one-rank batch (0: 3072 on cuda, 768 on cpu); (c) uses half per rank")
    p.add_argument("--train-tokens", type=int, default=0, help="tokens of (b)'s batch (0: 2048 on cuda, 512 on cpu)")
    p.add_argument("--skip-multi", action="store_true", help="skip (c)")
    p.add_argument("--multi-timeout", type=float, default=120.0, help="seconds each of (c)'s runs may take")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("gpu_torch_check: no CUDA device (use --device cpu for a dry run)")
        return 2
    device = torch.device("cuda", 0) if args.device == "cuda" else torch.device("cpu")
    cuda = device.type == "cuda"
    tokens = args.tokens or (3072 if cuda else 768)
    train_tokens = args.train_tokens or (2048 if cuda else 512)
    if not cuda:
        torch.set_num_threads(max(1, (os.cpu_count() or 1)))
    torch.set_float32_matmul_precision("highest")  # no TF32: fp32 is checked at fp32 accuracy
    print(environment(device), flush=True)
    began = time.perf_counter()

    if cuda:
        torch.cuda.set_device(device)
    backend = "nccl" if cuda else "gloo"
    start = time.perf_counter()
    try:
        init_group(backend, 0, 1, free_port(), 120.0)
        record("a", f"{backend} group of 1 rank", "PASS", f"tcp://127.0.0.1, backend {dist.get_backend()}",
               time.perf_counter() - start)
    except Exception as e:
        record("a", f"{backend} group of 1 rank", "FAIL", f"{type(e).__name__}: {e} (so no (a) and (b))",
               time.perf_counter() - start)
    if dist.is_initialized():
        check_one_rank(device, tokens, train_tokens)
        dist.destroy_process_group()
    if cuda:
        torch.cuda.empty_cache()

    if not args.skip_multi:
        print("\n== (c) several ranks on one device: NCCL (information), gloo over the staged transport", flush=True)
        section = time.perf_counter()
        try_ranks("nccl", device, max(256, tokens // 2), min(60.0, args.multi_timeout), 2)
        # Every mask set on 2 processes; the causal one on 4 (the acceptance script's 8 minutes).
        for world, sets in ((2, tuple(MASK_SETS)), (4, ("causal",))):
            try_ranks("gloo", device, max(256, tokens // world), args.multi_timeout, world, "staged", sets)
        print(f"(c) took {time.perf_counter() - section:.1f} s", flush=True)

    print(f"\n== summary ({time.perf_counter() - began:.1f} s)")
    failed = [r for r in RESULTS if r.status == "FAIL"]
    width = max(len(r.name) for r in RESULTS)
    for r in RESULTS:
        print(f"({r.part}) {r.status:9s} {r.name:{width}s}  {r.seconds:6.2f} s  {r.detail[:160]}")
    counts = {s: sum(r.status == s for r in RESULTS) for s in ("PASS", "FAIL", "SKIP", "INFO", "INFO-FAIL")}
    print(", ".join(f"{n} {s}" for s, n in counts.items()))
    passed = "PASS ((a), (b) and (c)'s staged runs)"
    verdict = "FAIL: " + ", ".join(f"({r.part}) {r.name}" for r in failed) if failed else passed
    print(f"RESULT: {verdict}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
