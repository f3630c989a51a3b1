"""The second interpreter of the Plan IR (the first is runtime/executor.cpp, over MPI): one rank's
Program run on torch tensors, on the user's device and process group.

Semantics are the C++ executor's: buffers start as the Program says (the caller's tensor for ``input``,
zeros, -inf, and zeros for ``undefined`` so a bug reads zeros, not garbage); instructions run in program
order; a launch posts its messages and returns, its wait completes them; ``merge`` combines partial O/LSE
by log-sum-exp (rows no part sees stay O = 0, LSE = -inf), ``sum`` adds parts into the output; the
buffers marked ``output`` are the results. Buffers are token-major: [rows, heads, head_dim], LSE
[rows, q_heads]; Q, K, V, O and dO in the plan's dtype, LSE and gradients fp32.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from .. import _core
from .backends import KernelBackend
from .comm import GroupComm, PendingLaunch, slice_view
from .program import (
    STORED_FIELDS,
    Attention,
    AttentionBackward,
    Copy,
    Launch,
    ParsedPlan,
    RankProgram,
    Reduce,
    Slice,
    Wait,
)


def buffer_shape(plan: ParsedPlan, buffer_field: str, rows: int) -> tuple[int, ...]:
    if buffer_field == "lse":
        return (rows, plan.q_heads)
    return (rows, plan.heads_of(buffer_field), plan.head_dim)


def _allocate(plan: ParsedPlan, program: RankProgram, inputs: Mapping[str, torch.Tensor], device: torch.device,
              dtype: torch.dtype) -> list[torch.Tensor]:
    buffers = []
    for index, b in enumerate(program.buffers):
        shape = buffer_shape(plan, b.field, b.rows)
        buffer_dtype = dtype if b.field in STORED_FIELDS else torch.float32
        if b.init == "input":
            given = inputs.get(b.name)
            usable = given is not None and tuple(given.shape) == shape and given.dtype == buffer_dtype
            if given is None or not usable or not given.is_contiguous():
                raise _core.Error(f"rank {program.rank}: input '{b.name}' must be a contiguous {buffer_dtype} "
                                  f"tensor of shape {shape}")
            # The caller's tensor is read in place; a Program that writes into an input gets a copy.
            buffers.append(given.clone() if index in program.written else given)
        elif b.init == "-inf":
            buffers.append(torch.full(shape, float("-inf"), dtype=buffer_dtype, device=device))
        else:
            buffers.append(torch.zeros(shape, dtype=buffer_dtype, device=device))
    return buffers


def _merge(buffers: Sequence[torch.Tensor], r: Reduce) -> None:
    """out, out_lse = the log-sum-exp merge of the parts (out may be one of them: parts are read first)."""
    lse = torch.stack([slice_view(buffers, s) for s in r.part_lse])  # [parts, rows, heads]
    merged = torch.logsumexp(lse, dim=0)
    seen = torch.isfinite(merged)
    weights = torch.where(seen, torch.exp(lse - torch.where(seen, merged, 0.0)), 0.0)
    parts = torch.stack([slice_view(buffers, s).float() for s in r.parts])
    out = slice_view(buffers, r.out)
    out.copy_((weights.unsqueeze(-1) * parts).sum(dim=0).to(out.dtype))
    slice_view(buffers, r.out_lse).copy_(merged)


def _sum(buffers: Sequence[torch.Tensor], out: Slice, parts: Sequence[Slice]) -> None:
    target = slice_view(buffers, out)
    for part in parts:
        target.add_(slice_view(buffers, part))


def run_program(plan: ParsedPlan, inputs: Mapping[str, torch.Tensor], backend: KernelBackend, comm: GroupComm,
                scale: float) -> dict[str, torch.Tensor]:
    """Runs this rank's (comm.rank's) Program of ``plan`` and returns its output buffers by name."""
    program = plan.programs[comm.rank]
    device = next(iter(inputs.values())).device
    dtype = torch.bfloat16 if plan.dtype_bytes == 2 else torch.float32
    buffers = _allocate(plan, program, inputs, device, dtype)
    pending: dict[int, PendingLaunch] = {}
    for i in program.instructions:
        if isinstance(i, Launch):
            pending[i.id] = comm.launch(i.transfers, buffers)
        elif isinstance(i, Wait):
            pending.pop(i.launch).wait()
        elif isinstance(i, Attention):
            backend.forward(plan, i, buffers, scale)
        elif isinstance(i, AttentionBackward):
            backend.backward(plan, i, buffers, scale)
        elif isinstance(i, Copy):
            slice_view(buffers, i.dst).copy_(slice_view(buffers, i.src))
        elif i.op == "merge":
            _merge(buffers, i)
        else:
            _sum(buffers, i.out, i.parts)
    if pending:
        raise _core.Error(f"rank {comm.rank}: launches {sorted(pending)} were never waited for")
    return {b.name: buffers[index] for index, b in enumerate(program.buffers) if b.output}
