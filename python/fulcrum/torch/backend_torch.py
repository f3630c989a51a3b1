"""Kernel backend "torch": attention as explicit masked-softmax math in PyTorch, on any device.

The reference-style path: per item, per run of heads sharing a mask, per block of query rows, it forms
the scores, masks them with the document's mask (``_core.mask_matrix``: the C++ mask is the one source
of truth) and computes O and the log-sum-exp in fp32. Backward is the standard rule from the *merged* O
and LSE the backward Program passes (kernels/merge.hpp): P = exp(S - LSE), dV = P^T dO,
dS = P * (dO V^T - rowsum(dO * O)), dQ = scale dS K, dK = scale dS^T Q; dK and dV of a GQA group's
q heads add into their kv head. It is what CUDA runs without flash-attn, and on CPU it tests that logic.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch

from .. import _core
from .item_backend import ItemBackend
from .program import Item, ParsedPlan, item_runs

# Score elements (heads x query rows x keys) per block: bounds the fp32 temporaries to a few 64 MiB.
MAX_SCORES = 1 << 24


@dataclass(frozen=True)
class Block:
    """Query rows [row, row + count) at document positions from ``position``, q heads [h0, h1) under
    ``mask``, against key rows [key_row, key_row + keys) at positions from ``key_position``."""

    row: int
    position: int
    count: int
    key_row: int
    key_position: int
    keys: int
    h0: int
    h1: int
    mask: _core.Mask
    doc_len: int
    every_pair: bool  # the mask allows the whole rectangle: no mask matrix needed


def blocks(plan: ParsedPlan, item: Item) -> list[Block]:
    key_row, key_position, keys = item.keys
    doc_len = plan.documents[item.doc].length
    out = []
    for run in item_runs(plan, item):
        step = max(1, MAX_SCORES // max(1, (run.end - run.begin) * keys))
        for row, position, count in item.queries:
            for offset in range(0, count, step):
                n = min(step, count - offset)
                pairs = _core.attention_pairs(run.mask, [(position + offset, position + offset + n)],
                                              (key_position, key_position + keys), doc_len)
                out.append(Block(row + offset, position + offset, n, key_row, key_position, keys, run.begin, run.end,
                                 run.mask, doc_len, pairs == n * keys))
    return out


def _item_blocks(plan: ParsedPlan, items: Sequence[Item]) -> Iterator[Block]:
    for item in items:
        cached = plan.kernel_cache.get(("torch", id(item)))
        if cached is None:
            cached = plan.kernel_cache["torch", id(item)] = blocks(plan, item)
        yield from cached


class _Operands:
    """One block's fp32 operands: Q rows and the K/V rows of each q head's kv head, and its scores."""

    def __init__(self, plan: ParsedPlan, b: Block, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                 scale: float) -> None:
        group = plan.q_heads // plan.kv_heads
        self.kv_heads = torch.arange(b.h0, b.h1, device=q.device) // group
        self.q = q[b.row : b.row + b.count, b.h0 : b.h1].float()
        self.k = k[b.key_row : b.key_row + b.keys].index_select(1, self.kv_heads).float()
        self.v = v[b.key_row : b.key_row + b.keys].index_select(1, self.kv_heads).float()
        self.scores = torch.einsum("qhd,khd->hqk", self.q, self.k) * scale
        self.allowed: torch.Tensor | None = None  # [rows, keys]; None: every pair
        if not b.every_pair:
            allowed = _core.mask_matrix(b.mask, [(b.position, b.position + b.count)],
                                        (b.key_position, b.key_position + b.keys), b.doc_len)
            self.allowed = torch.from_numpy(allowed).to(q.device)
            self.scores.masked_fill_(~self.allowed, float("-inf"))

    def probabilities(self, lse: torch.Tensor) -> torch.Tensor:
        """exp(S - LSE) for lse [heads, rows]; rows that see no key (LSE = -inf) get 0, not NaN, and rows whose
        LSE is NaN (a NaN score) get NaN: exactly the reference's non-finite rows."""
        seen = ~torch.isneginf(lse).unsqueeze(-1)
        return torch.where(seen, torch.exp(self.scores - torch.where(seen, lse.unsqueeze(-1), 0.0)), 0.0)

    def output(self, p: torch.Tensor) -> torch.Tensor:
        """P V [rows, heads, dim] as the reference sums it: only over the keys the mask lets a row see, so a
        non-finite value reaches those rows and no others (0 x NaN in a dense product reached the rest)."""
        finite = torch.isfinite(self.v)
        out = torch.einsum("hqk,khd->qhd", p, torch.where(finite, self.v, 0.0))
        if self.allowed is None or bool(finite.all()):
            return out
        bad = (~finite).any(-1).any(-1).nonzero().squeeze(1)  # the few keys with a non-finite value
        seen = self.allowed[:, bad, None, None]  # [rows, bad keys, 1, 1]
        values = torch.where(finite, 0.0, self.v)[bad]  # only what the dense product left out
        terms = p[:, :, bad].permute(1, 2, 0)[..., None] * values[None]  # [rows, bad keys, heads, dim]
        return out + torch.where(seen, terms, 0.0).sum(1)


class TorchBackend(ItemBackend):
    name = "torch"

    def forward_items(self, plan: ParsedPlan, items: Sequence[Item], q: torch.Tensor, k: torch.Tensor,
                      v: torch.Tensor, o: torch.Tensor, lse: torch.Tensor, *, scale: float) -> None:
        """Writes O and LSE of the items' query rows and heads (a row that sees no key: O = 0, LSE = -inf)."""
        for b in _item_blocks(plan, items):
            x = _Operands(plan, b, q, k, v, scale)
            block_lse = torch.logsumexp(x.scores, dim=-1)  # [heads, rows]; -inf where no key is visible
            out = x.output(x.probabilities(block_lse))
            o[b.row : b.row + b.count, b.h0 : b.h1] = out.to(o.dtype)
            lse[b.row : b.row + b.count, b.h0 : b.h1] = block_lse.T

    def backward_items(self, plan: ParsedPlan, items: Sequence[Item], q: torch.Tensor, k: torch.Tensor,
                       v: torch.Tensor, o: torch.Tensor, lse: torch.Tensor, d_o: torch.Tensor, dq: torch.Tensor,
                       dk: torch.Tensor, dv: torch.Tensor, *, scale: float) -> None:
        """Adds the items' gradients into dq, dk and dv, given the merged O and LSE of their rows."""
        for b in _item_blocks(plan, items):
            x = _Operands(plan, b, q, k, v, scale)
            rows, heads, keys = slice(b.row, b.row + b.count), slice(b.h0, b.h1), slice(b.key_row, b.key_row + b.keys)
            p = x.probabilities(lse[rows, heads].T)
            grad_o = d_o[rows, heads].float()
            delta = (grad_o * o[rows, heads].float()).sum(-1).T  # rowsum(dO * O): [heads, rows]
            ds = p * (torch.einsum("qhd,khd->hqk", grad_o, x.v) - delta.unsqueeze(-1))
            dq[rows, heads] += torch.einsum("hqk,khd->qhd", ds, x.k) * scale
            dk[keys].index_add_(1, x.kv_heads, torch.einsum("hqk,qhd->khd", ds, x.q) * scale)
            dv[keys].index_add_(1, x.kv_heads, torch.einsum("hqk,qhd->khd", p, grad_o))
