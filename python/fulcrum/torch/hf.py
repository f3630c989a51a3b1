"""Fulcrum as a Hugging Face transformers attention implementation: ``attn_implementation="fulcrum"``.

Importing this module registers the implementation with transformers' ``AttentionInterface``. A model
configured with it trains on packed documents: its input is one row (batch 1) of this rank's tokens, with
``position_ids`` restarting at 0 for each document, as for packed flash-attention training. Attention runs
inside a context block that says which documents the rows hold and which PackedAttention computes it:

    import fulcrum.torch.hf as fhf
    model = LlamaForCausalLM(LlamaConfig(..., attn_implementation="fulcrum"))
    step = fulcrum.torch.compile_step(assignment, model_shape)       # every rank, the same step
    rows = PackedRows.from_step(step, dist.get_rank(group))          # this rank's tokens
    with fhf.plan_context(step, group):                              # fulcrum.torch.attention on the group
        logits = model(input_ids=ids[None], position_ids=rows.positions()[None], use_cache=False).logits
    # one process, no plan: with fhf.attention_context(reference_attention(rows), rows): ...

The context (not a model argument) carries the plan because it changes every step while the model does
not, and because transformers passes the attention function only what the model's layers hand it. Every
call checks that the rows and position_ids are the context's, so a plan for other rows fails loudly.
transformers builds no mask for an implementation it does not know (the plan knows the documents), so a
padding ``attention_mask`` is not read: packed rows have no padding.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
from transformers import AttentionInterface

from .. import _core
from .backends import BackendChoice
from .packed import PackedAttention, PackedRows, planned_attention
from .step import StepPlan

NAME = "fulcrum"


@dataclass
class _Active:
    attention: PackedAttention
    rows: PackedRows
    positions: torch.Tensor
    # position_ids tensors already compared with `positions`: a model passes one tensor to all its layers.
    checked: list[torch.Tensor] = field(default_factory=list)
    on_device: dict[torch.device, torch.Tensor] = field(default_factory=dict)

    def positions_on(self, device: torch.device) -> torch.Tensor:
        """``positions`` on ``device``, copied there once per context."""
        if device not in self.on_device:
            self.on_device[device] = self.positions.to(device)
        return self.on_device[device]


_active: ContextVar[_Active | None] = ContextVar("fulcrum_hf_attention", default=None)


@contextmanager
def attention_context(attention: PackedAttention, rows: PackedRows) -> Iterator[None]:
    """Within the block, ``attn_implementation="fulcrum"`` layers compute ``attention`` over ``rows``.

    Backward needs no context (the attention's autograd graph holds what it needs), except with gradient
    checkpointing, which reruns the layers' forward during backward: call backward inside the block then.
    Blocks nest; the innermost wins.
    """
    token = _active.set(_Active(attention, rows, rows.positions()))
    try:
        yield
    finally:
        _active.reset(token)


def plan_context(step: StepPlan, group: dist.ProcessGroup | None = None, *,
                 backend: BackendChoice = "auto") -> AbstractContextManager[None]:
    """``attention_context`` for ``fulcrum.torch.attention`` over ``step`` on ``group`` (None: the default
    group): this process's rows are ``PackedRows.from_step(step, rank in group)``."""
    if not dist.is_available() or not dist.is_initialized():
        raise _core.InputError("group: torch.distributed is not initialised (call init_process_group first)")
    rows = PackedRows.from_step(step, dist.get_rank(group))
    return attention_context(planned_attention(step, group, backend=backend), rows)


def _check_positions(active: _Active, position_ids: Any) -> None:
    if position_ids is None:
        raise _core.InputError("position_ids: missing; pass position_ids=rows.positions()[None] (positions restart "
                               "at 0 in each document) to the model")
    if any(position_ids is seen for seen in active.checked):
        return
    message = (f"position_ids: shape {tuple(position_ids.shape)}, not the attention context's rows' positions "
               f"[1, {active.rows.rows}] (rows.positions()[None])")
    if tuple(position_ids.shape) != (1, active.rows.rows):
        raise _core.InputError(message)
    expected = active.positions_on(position_ids.device)
    if position_ids.device.type == "cpu":
        if not torch.equal(position_ids[0], expected):
            raise _core.InputError(message)
    else:  # compared on the device without waiting for it: a step syncs only where its Program waits for a message
        torch._assert_async(torch.all(position_ids[0] == expected), message)
    active.checked.append(position_ids)


def fulcrum_attention_forward(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                              attention_mask: torch.Tensor | None, scaling: float | None = None,
                              dropout: float = 0.0, **kwargs: Any) -> tuple[torch.Tensor, None]:
    """transformers' attention-function signature: query [1, q_heads, rows, head_dim], key and value
    [1, kv_heads, rows, head_dim]; returns ([1, rows, q_heads, head_dim], no attention weights)."""
    active = _active.get()
    if active is None:
        raise _core.InputError(f"attn_implementation='{NAME}': call the model inside "
                               "fulcrum.torch.hf.attention_context(attention, rows)")
    if query.dim() != 4 or query.shape[0] != 1 or query.shape[2] != active.rows.rows:
        raise _core.InputError(f"query: shape {tuple(query.shape)}: must be [1, q_heads, {active.rows.rows}, head_dim] "
                               "(one packed row of the context's rows)")
    if key.shape[2] != query.shape[2]:
        raise _core.InputError(f"key: {key.shape[2]} positions for {query.shape[2]} queries: a KV cache is not "
                               "supported (pass use_cache=False)")
    if attention_mask is not None:
        raise _core.InputError("attention_mask: must be None; the plan knows the documents (no padding in packed rows)")
    if dropout != 0.0:
        raise _core.InputError(f"dropout = {dropout}: attention dropout is not supported (must be 0)")
    for name in ("sliding_window", "softcap"):
        if kwargs.get(name) is not None:
            raise _core.InputError(f"{name} = {kwargs[name]}: not supported by attn_implementation='{NAME}'")
    _check_positions(active, kwargs.get("position_ids"))
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    q, k, v = (t[0].transpose(0, 1).contiguous() for t in (query, key, value))  # [rows, heads, head_dim]
    o = active.attention(q, k, v, scale=scale)
    return o.unsqueeze(0), None


AttentionInterface.register(NAME, fulcrum_attention_forward)
