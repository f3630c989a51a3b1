"""fulcrum.torch.attention on real torch.distributed gloo groups, against plain fp64 attention.

Every registered planner plans a random imbalanced batch with GQA (4 q heads over 2 kv heads); the
StepPlan runs on 2 and on 4 processes, with the fulcrum (C++ CPU kernels) and the torch (pure PyTorch)
backends, for all-causal documents and for mixed masks (lambda, full, and per-head masks), in fp32 and
in bf16. Each rank checks its rows of O and LSE, and its rows of dQ, dK and dV after backward, against
attention over whole documents computed here in fp64 (on the same rounded inputs) with masks written
here (independent of the C++ masks). Tolerance per tensor: |error| <= TOLERANCE[dtype] * max(1, max
|reference|): 1e-5 for fp32 (seen: 7e-7); 1e-2 for bf16 (seen: 3.5e-3), whose O, partial Os and
returned gradients are rounded to 8 mantissa bits (2^-9 relative each).
"""
from __future__ import annotations

import math
import random

import pytest

torch = pytest.importorskip("torch", reason="fulcrum.torch needs PyTorch (pip install .[torch])")
import fulcrum.torch as ft  # noqa: E402
from conftest import whole_stripes  # noqa: E402
from gloo_group import run_on_gloo  # noqa: E402

import fulcrum  # noqa: E402

Q_HEADS, KV_HEADS, HEAD_DIM = 4, 2, 16
TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 1e-2}
# Options that make small batches interesting: DistCA moves fine shards, DCP's blocks are smaller than the
# documents, WLB-LLM runs per-document CP inside groups of 2 (its defaults would plan no traffic here).
PLANNER_OPTIONS = {"distca": {"granularity": 16, "tolerance": 0.05}, "dcp": {"dcp_block": 32}, "wlb": {"cp_degree": 2}}
# DCP cutting head blocks: tasks over one kv group's q heads each, so messages carry only those heads.
HEAD_SPLIT = "dcp+head-blocks"
PLANNERS = (*fulcrum.planner_names(), HEAD_SPLIT)
PLANNER_OPTIONS[HEAD_SPLIT] = {"dcp_block": 32, "dcp_head_blocks": 2}
HEAD_MASKS = ("causal", "window:8", "lambda:2:6", "causal")
MASK_SETS = {"causal": ("causal",), "mixed": ("lambda:4:24", "full", "causal+head-masks")}
# fa2 on CPU: torch's FlashAttention-2 varlen calls, run sequence by sequence on its CPU flash attention.
BACKENDS = ("fulcrum", "torch", "fa2")


def model_shape() -> fulcrum.ModelShape:
    m = fulcrum.ModelShape()
    m.name, m.layers, m.hidden, m.ffn_hidden = "test-gqa", 1, Q_HEADS * HEAD_DIM, 4 * Q_HEADS * HEAD_DIM
    m.q_heads, m.kv_heads, m.head_dim, m.dtype_bytes = Q_HEADS, KV_HEADS, HEAD_DIM, 4
    return m


def make_batch(ranks: int, tokens_per_rank: int, masks: tuple[str, ...], seed: int) -> fulcrum.Batch:
    """Short and long documents in random order, filling the ranks' budgets: imbalanced causal work."""
    rng = random.Random(seed)
    total, lengths = ranks * tokens_per_rank, []
    while sum(lengths) < total:
        lengths.append(min(rng.choice([rng.randint(5, 60), rng.randint(100, 380)]), total - sum(lengths)))
    docs = []
    for i, length in enumerate(lengths):
        spec = masks[i % len(masks)]
        doc = fulcrum.Document(i, length, "causal" if spec == "causal+head-masks" else spec)
        if spec == "causal+head-masks":
            doc.head_masks = [fulcrum.Mask(m) for m in HEAD_MASKS]
        docs.append(doc)
    return fulcrum.pack_batch(docs, ranks, tokens_per_rank)


def allowed(spec: str, n: int) -> torch.Tensor:
    """The mask as a [query, key] boolean matrix over a whole document, from the masks' definitions."""
    q, k = torch.arange(n)[:, None], torch.arange(n)[None, :]
    kind, *params = spec.split(":", 3 if spec.startswith("striped:") else -1)
    if kind == "striped":  # stored permuted: slot p holds position source[p] (block-striped over W ranks)
        ranks, block, inner = int(params[0]), int(params[1]), params[2]
        local = torch.arange(n) % (n // ranks)
        source = ((local // block) * ranks + torch.arange(n) // (n // ranks)) * block + local % block
        return allowed(inner, n)[source][:, source]
    if kind == "full":
        return torch.ones(n, n, dtype=torch.bool)
    if kind == "causal":
        return k <= q
    if kind == "window":
        return (k <= q) & (k > q - int(params[0]))
    if kind == "lambda":
        return (k <= q) & ((k < int(params[0])) | (k > q - int(params[1])))
    raise AssertionError(f"no reference mask for '{spec}'")


def document_data(doc: fulcrum.Document, dtype: torch.dtype) -> list[torch.Tensor]:
    """q, k, v, dO of a whole document, from its id: values of ``dtype`` held in fp64."""
    g = torch.Generator().manual_seed(1000 + doc.id)
    return [torch.randn(doc.length, h, HEAD_DIM, generator=g, dtype=torch.float64).to(dtype).double()
            for h in (Q_HEADS, KV_HEADS, KV_HEADS, Q_HEADS)]


def reference(doc: fulcrum.Document, q, k, v, d_o) -> list[torch.Tensor]:
    """O, LSE [rows, heads], dQ, dK, dV of plain attention over the whole document, in fp64."""
    q, k, v = (t.clone().requires_grad_() for t in (q, k, v))
    n, group = q.shape[0], Q_HEADS // KV_HEADS
    specs = [str(m) for m in doc.head_masks] or [str(doc.mask)] * Q_HEADS
    mask = torch.stack([allowed(s, n) for s in specs])  # [heads, q, k]
    scores = torch.einsum("qhd,khd->hqk", q, k.repeat_interleave(group, 1)) / math.sqrt(HEAD_DIM)
    scores = scores.masked_fill(~mask, -math.inf)
    o = torch.einsum("hqk,khd->qhd", torch.softmax(scores, dim=-1), v.repeat_interleave(group, 1))
    (o * d_o).sum().backward()
    return [o.detach(), torch.logsumexp(scores, dim=-1).detach().T, q.grad, k.grad, v.grad]


def check_case(rank: int, batch: fulcrum.Batch, planner: str, backend: str, mode: str, dtype: torch.dtype,
               transport: str, references: dict) -> list[str]:
    """Runs one planner's StepPlan forward and backward; returns what differs from the reference."""
    options = fulcrum.PlannerOptions(model_shape(), **PLANNER_OPTIONS.get(planner, {}))
    made = fulcrum.make_planner(planner.split("+")[0], options)
    assignment = made.plan(whole_stripes(made, batch))
    if planner == HEAD_SPLIT:
        assert any(t.heads is not None for t in assignment.tasks), "the head-split case must split heads"
    step = ft.compile_step(assignment, model_shape(), mode=mode, dtype=dtype)
    docs = assignment.batch.documents
    for d in docs:
        if (d.id, d.length, str(d.mask), dtype) not in references:
            references[d.id, d.length, str(d.mask), dtype] = reference(d, *document_data(d, dtype))
    data = {i: document_data(d, dtype) for i, d in enumerate(docs)}
    want = {i: references[d.id, d.length, str(d.mask), dtype] for i, d in enumerate(docs)}

    def rows(source: dict, field: int) -> torch.Tensor:
        return torch.cat([source[o.doc][field][o.begin : o.end] for o in step.owned(rank)])

    q, k, v = (rows(data, f).to(dtype).requires_grad_() for f in range(3))
    o, lse = ft.attention(q, k, v, step, backend=backend, return_lse=True, transport=transport)
    (o * rows(data, 3).to(dtype)).sum().backward()
    failures = []
    for name, got, field in (("o", o, 0), ("lse", lse.T, 1), ("dq", q.grad, 2), ("dk", k.grad, 3), ("dv", v.grad, 4)):
        ref = rows(want, field)
        error = (got.double() - ref).abs().max().item()
        bound = TOLERANCE[dtype] * max(1.0, ref.abs().max().item())
        if got.dtype != (torch.float32 if name == "lse" else dtype) or not error <= bound:
            failures.append(f"rank {rank} {planner}/{mode}/{backend}/{dtype}/{transport}: {name} ({got.dtype}) |error| "
                            f"{error:.2e} > {bound:.2e}")
    return failures


def cases(mask_set: str) -> list[tuple[str, str, str, torch.dtype, str]]:
    """(planner, backend, mode, dtype, transport): every planner on every backend in pingpong and fp32;
    single-stream once; bf16 for every planner on the causal set; the staged transport (through host memory,
    what several processes sharing one GPU use) for every planner on the mixed set."""
    out = [(p, b, "pingpong", torch.float32, "direct") for p in PLANNERS for b in BACKENDS]
    out.append(("distca", "fulcrum", "single-stream", torch.float32, "direct"))
    if mask_set == "causal":
        out += [(p, b, "pingpong", torch.bfloat16, "direct") for p in fulcrum.planner_names() for b in BACKENDS]
    else:
        out += [(p, "fulcrum", "pingpong", torch.float32, "staged") for p in PLANNERS]
    return out


def check_rank(rank: int, world: int) -> dict:
    """Every case on this rank of a gloo group (gloo_group.run_on_gloo): how many ran, and what failed."""
    failures, ran, references = [], 0, {}
    for set_name, masks in MASK_SETS.items():
        batch = make_batch(world, 160, masks, seed=world * 10 + len(set_name))
        for case in cases(set_name):
            failures += [f"[{set_name}] {f}" for f in check_case(rank, batch, *case, references)]
            ran += 1
    return {"ran": ran, "failures": failures}


@pytest.mark.parametrize("world", [2, 4])
def test_every_planner_matches_fp64_attention_forward_and_backward(world):
    expected = sum(len(cases(name)) for name in MASK_SETS)
    for result in run_on_gloo(check_rank, world):
        assert result["failures"] == []
        assert result["ran"] == expected
