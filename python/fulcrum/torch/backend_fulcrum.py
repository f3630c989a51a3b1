"""Kernel backend "fulcrum": Fulcrum's own fused C++ CPU kernels, on the executor's CPU tensors in place.

Each Attention instruction is one fused ``_core.attention_forward`` call over all its items, exactly what
the C++ executor runs; the tensors are handed over as NumPy views of their memory (bf16 as uint16 bits),
and the view is checked to be the tensor's own memory, so the kernels' writes land in the buffers.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from .. import _core
from .program import Attention, AttentionBackward, Item, ParsedPlan


def numpy_view(t: torch.Tensor) -> npt.NDArray[Any]:
    """The memory of a contiguous CPU tensor as a NumPy array (bf16 as uint16 bits), never a copy."""
    if t.device.type != "cpu" or not t.is_contiguous():
        raise _core.Error(f"fulcrum kernels: a {t.device} tensor (contiguous: {t.is_contiguous()}) has no NumPy view")
    array: npt.NDArray[Any] = (
        t.view(torch.int16).numpy().view(np.uint16) if t.dtype == torch.bfloat16 else t.numpy())
    if t.numel() > 0 and array.__array_interface__["data"][0] != t.data_ptr():
        raise _core.Error("fulcrum kernels: the NumPy view of a tensor is a copy; the kernel's writes would be lost")
    return array


def kernel_tasks(plan: ParsedPlan, items: Sequence[Item]) -> list[_core.AttentionTask]:
    """The items as the kernels' tasks (the C++ executor's task_from_item): spans, document, masks, heads."""
    tasks = []
    for item in items:
        doc = plan.documents[item.doc]
        queries = list(item.queries) or [(0, 0, 0)]
        tasks.append(_core.AttentionTask(queries, item.keys, doc.length, doc.mask, heads=item.heads,
                                         head_masks=list(doc.head_masks)))
    return tasks


def _tasks(plan: ParsedPlan, op: Attention | AttentionBackward) -> list[_core.AttentionTask]:
    cached = plan.kernel_cache.get(("fulcrum", id(op)))
    if cached is None:
        cached = plan.kernel_cache["fulcrum", id(op)] = kernel_tasks(plan, op.items)
    tasks: list[_core.AttentionTask] = cached
    return tasks


class FulcrumBackend:
    name = "fulcrum"

    def forward(self, plan: ParsedPlan, op: Attention, buffers: Sequence[torch.Tensor], scale: float) -> None:
        q, k, v, o, lse = (numpy_view(buffers[i]) for i in (op.q, op.k, op.v, op.o, op.lse))
        _core.attention_forward(_tasks(plan, op), q, k, v, o=o, lse=lse, scale=scale)

    def backward(self, plan: ParsedPlan, op: AttentionBackward, buffers: Sequence[torch.Tensor], scale: float) -> None:
        q, k, v, o, lse, d_o, dq, dk, dv = (
            numpy_view(buffers[i]) for i in (op.q, op.k, op.v, op.o, op.lse, op.d_o, op.dq, op.dk, op.dv))
        _core.attention_backward(_tasks(plan, op), q, k, v, o, lse, d_o, dq=dq, dk=dk, dv=dv, scale=scale)
