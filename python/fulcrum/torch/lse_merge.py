"""Partial attentions of the same rows over disjoint keys, merged into one by their log-sum-exps (the rule of
kernels/merge.hpp): LSE = logsumexp over the parts, O = sum of each part's O weighted by exp(LSE_part - LSE).
Rows no part has seen (every LSE -inf) stay O = 0, LSE = -inf. Used by the executor's Reduce instructions and
by the varlen backends' pieces of one row."""
from __future__ import annotations

import torch


def merge_by_lse(outs: torch.Tensor, lses: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """outs [parts, rows, heads, dim], lses [parts, rows, heads] -> (O fp32 [rows, heads, dim], LSE fp32)."""
    lses = lses.float()
    merged = torch.logsumexp(lses, dim=0)
    seen = torch.isfinite(merged)
    weights = torch.where(seen, torch.exp(lses - torch.where(seen, merged, 0.0)), 0.0)
    return (weights.unsqueeze(-1) * outs.float()).sum(dim=0), merged
