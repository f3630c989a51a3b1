"""A micro-batch as two nano-batches, each planned and compiled on its own: the StepPlans PingPong runs.

Every rank keeps its own documents (the data loader's layout, FlashAttention cu_seqlens per rank); its
documents in order are cut once, whole, where the first part holds closest to half the rank's tokens.
Nano-batch A is every rank's first part, B every rank's second, so a rank's rows of the micro-batch are its
A rows followed by its B rows, in the loader's order. Each nano-batch is one Batch, planned by the caller's
planner and compiled single-stream: the overlap comes from the other nano-batch, not from inside a plan.
Only planners that keep placement fit: a planner that moved tokens to other ranks would leave a rank's
context-independent layers working on rows its attention plan does not hold.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import SupportsInt

import torch

from .. import _core
from .step import StepPlan, compile_step

CuSeqlens = Sequence[Sequence[SupportsInt]]


def split_documents(per_rank_cu_seqlens: CuSeqlens) -> tuple[list[list[int]], list[list[int]]]:
    """Each rank's cu_seqlens cut in two at the document boundary nearest half its tokens (ties: the earlier
    boundary); returns (A, B), each per rank cu_seqlens from 0. A rank with one document keeps it in A."""
    first: list[list[int]] = []
    second: list[list[int]] = []
    for cu in per_rank_cu_seqlens:
        bounds = [int(c) for c in cu]
        total = bounds[-1] if bounds else 0
        cut = min(range(len(bounds)), key=lambda i: (abs(2 * bounds[i] - total), i)) if bounds else 0
        if len(bounds) > 1 and cut == 0:
            cut = 1  # a rank with documents gives A at least one
        first.append(bounds[: cut + 1] if bounds else [0])
        second.append([b - bounds[cut] for b in bounds[cut:]] if bounds else [0])
    return first, second


def plan_nano_batches(planner: _core.Planner, per_rank_cu_seqlens: CuSeqlens, model: _core.ModelShape, *,
                      tokens_per_rank: int = 0, mask: _core.MaskLike = "causal",
                      dtype: torch.dtype = torch.float32) -> tuple[StepPlan, StepPlan]:
    """Splits every rank's documents into nano-batches A and B (``split_documents``), plans each with
    ``planner`` and compiles it single-stream for ``model``'s heads: the ``steps`` of ``PingPong``.

    per_rank_cu_seqlens: rank r's documents as cu_seqlens (0, l1, l1+l2, ...), as ``Batch.from_cu_seqlens``
    takes them; tokens_per_rank: the micro-batch's per-rank budget (0: the largest rank's tokens); mask:
    every document's mask. Raises fulcrum.InputError naming the argument.
    """
    if not isinstance(planner, _core.Planner):
        raise _core.InputError(f"planner: a {type(planner).__name__}, not a fulcrum.Planner (make_planner builds one)")
    if not planner.capabilities.keeps_placement:
        raise _core.InputError(f"planner: '{planner.name}' places tokens on other ranks than the input's "
                               "(keeps_placement is false); ping-pong needs every rank to keep its rows: use a "
                               "planner that keeps placement, e.g. distca")
    # The whole micro-batch first: malformed cu_seqlens are reported against the caller's own entries.
    whole = _core.Batch.from_cu_seqlens(per_rank_cu_seqlens, mask=mask, tokens_per_rank=tokens_per_rank)
    first, second = split_documents(per_rank_cu_seqlens)
    if whole.total_tokens() == 0 or all(cu[-1] == 0 for cu in second):
        raise _core.InputError("per_rank_cu_seqlens: no rank holds two documents, so nano-batch B would be empty; "
                               "ping-pong needs documents to split")
    batch_a = _core.Batch.from_cu_seqlens(first, mask=mask)
    batch_b = _core.Batch.from_cu_seqlens(second, mask=mask, first_id=len(batch_a.documents))
    step_a = compile_step(planner.plan(batch_a), model, mode="single-stream", dtype=dtype)
    step_b = compile_step(planner.plan(batch_b), model, mode="single-stream", dtype=dtype)
    return step_a, step_b
