"""The base of the backends that compute any list of items over explicit tensors (``torch``, ``triton``): an
instruction's buffers are unpacked into them, and the varlen backends call the same methods for the items
FlashAttention-2 cannot mask."""
from __future__ import annotations

from collections.abc import Sequence

import torch

from .program import Attention, AttentionBackward, Item, ParsedPlan


class ItemBackend:
    name = "items"

    def forward(self, plan: ParsedPlan, op: Attention, buffers: Sequence[torch.Tensor], scale: float) -> None:
        self.forward_items(plan, op.items, *(buffers[i] for i in (op.q, op.k, op.v, op.o, op.lse)), scale=scale)

    def backward(self, plan: ParsedPlan, op: AttentionBackward, buffers: Sequence[torch.Tensor], scale: float) -> None:
        tensors = (buffers[i] for i in (op.q, op.k, op.v, op.o, op.lse, op.d_o, op.dq, op.dk, op.dv))
        self.backward_items(plan, op.items, *tensors, scale=scale)

    def forward_items(self, plan: ParsedPlan, items: Sequence[Item], q: torch.Tensor, k: torch.Tensor,
                      v: torch.Tensor, o: torch.Tensor, lse: torch.Tensor, *, scale: float) -> None:
        """Writes O and LSE of the items' query rows and heads (a row that sees no key: O = 0, LSE = -inf)."""
        raise NotImplementedError

    def backward_items(self, plan: ParsedPlan, items: Sequence[Item], q: torch.Tensor, k: torch.Tensor,
                       v: torch.Tensor, o: torch.Tensor, lse: torch.Tensor, d_o: torch.Tensor, dq: torch.Tensor,
                       dk: torch.Tensor, dv: torch.Tensor, *, scale: float) -> None:
        """Adds the items' gradients into dq, dk and dv, given the merged O and LSE of their rows."""
        raise NotImplementedError
