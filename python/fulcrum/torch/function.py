"""fulcrum.torch.attention: distributed core attention as a differentiable PyTorch op.

Forward runs the StepPlan's forward Program (q, k, v -> o, lse); backward runs its backward Program
(q, k, v, o, lse, dO -> dq, dk, dv), each on the caller's process group and device.
"""
from __future__ import annotations

import math
from typing import Any, cast

import torch
import torch.distributed as dist

from .. import _core
from .backends import BackendChoice, select_backend
from .comm import GroupComm, check_transport
from .executor import run_program
from .program import ParsedPlan
from .step import StepPlan


def _check_group_moves(backend: str, device: str, transport: str = "direct") -> None:
    """The group's backend must send ``device`` tensors point to point, which the plan's transfers do; the
    staged transport sends CPU tensors whatever the device.

    ``backend`` is dist.get_backend's: one name, or per device ("cpu:gloo,cuda:nccl"). Refused: gloo with CUDA
    tensors (its all_reduce takes them, but batch_isend_irecv fails deep inside, "writev: Bad address", as seen
    on an H200 with torch 2.11) and NCCL with CPU tensors (NCCL moves GPU memory only).
    """
    wire = "cpu" if transport == "staged" else device  # what goes over the group
    used = dict(part.split(":", 1) for part in backend.split(",")).get(wire) if ":" in backend else backend
    if used is None:
        raise _core.InputError(f"group: its backend '{backend}' has none for {wire} tensors")
    if used == "gloo" and wire == "cuda":
        raise _core.InputError("group: gloo cannot send CUDA tensors point to point; use an NCCL group for CUDA "
                               "tensors, or transport='staged' (through host memory: several processes on one GPU)")
    if used == "nccl" and wire == "cpu":
        sent = "transport='staged' sends host memory" if transport == "staged" else "these are on cpu"
        raise _core.InputError(f"group: NCCL moves CUDA tensors only; {sent} (use a gloo group)")


def _check_inputs(q: Any, k: Any, v: Any, step: StepPlan, group: dist.ProcessGroup | None,
                  transport: str = "direct") -> None:
    """Checks the group, the transport and every input against the plan (InputError naming the argument)."""
    check_transport(transport)
    if not isinstance(step, StepPlan):
        raise _core.InputError(f"step: a {type(step).__name__}, not a fulcrum.torch.StepPlan (compile_step builds one)")
    if not dist.is_available() or not dist.is_initialized():
        raise _core.InputError("group: torch.distributed is not initialised (call init_process_group first)")
    if group is not None and not isinstance(group, dist.ProcessGroup):
        raise _core.InputError(f"group: a {type(group).__name__}, not a torch.distributed.ProcessGroup (or None)")
    size = dist.get_world_size(group)
    if size != step.ranks:
        raise _core.InputError(f"group: {size} processes, but the plan is for {step.ranks} ranks")
    rank = dist.get_rank(group)
    rows = step.rows(rank)
    for name, t, heads in (("q", q, step.q_heads), ("k", k, step.kv_heads), ("v", v, step.kv_heads)):
        if not isinstance(t, torch.Tensor):
            raise _core.InputError(f"{name}: a {type(t).__name__}, not a torch.Tensor")
        if tuple(t.shape) != (rows, heads, step.head_dim):
            raise _core.InputError(f"{name}: shape {tuple(t.shape)} does not match the plan: rank {rank} owns {rows} "
                                   f"rows of {heads} heads x {step.head_dim}")
        if t.dtype != step.dtype:
            raise _core.InputError(f"{name}: dtype {t.dtype} is not the plan's {step.dtype}")
        if t.device != q.device:
            raise _core.InputError(f"{name}: device {t.device} differs from q's device {q.device}")
    if size > 1:  # one rank sends nothing
        _check_group_moves(str(dist.get_backend(group)), q.device.type, transport)


class _Attention(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, step: StepPlan,
                group: dist.ProcessGroup | None, backend: BackendChoice, scale: float,
                transport: str) -> tuple[torch.Tensor, torch.Tensor]:
        kernels = select_backend(backend, q.device, q.dtype)
        comm = GroupComm(group, transport=transport)
        inputs = {"q": q.detach().contiguous(), "k": k.detach().contiguous(), "v": v.detach().contiguous()}
        forward_plan: ParsedPlan = step._forward
        out = run_program(forward_plan, inputs, kernels, comm, scale)
        o, lse = out["o"], out["lse"]
        ctx.save_for_backward(inputs["q"], inputs["k"], inputs["v"], o, lse)
        ctx.fulcrum = (step, kernels, comm, scale)  # backward runs on the same group and backend
        ctx.mark_non_differentiable(lse)
        return o, lse

    @staticmethod
    def backward(ctx: Any, grad_o: torch.Tensor, _grad_lse: torch.Tensor | None) -> tuple[Any, ...]:
        q, k, v, o, lse = ctx.saved_tensors
        step, kernels, comm, scale = ctx.fulcrum
        inputs = {"q": q, "k": k, "v": v, "o": o, "lse": lse, "d_o": grad_o.contiguous().to(o.dtype)}
        backward_plan: ParsedPlan = step._backward
        grads = run_program(backward_plan, inputs, kernels, comm, scale)
        no_grad = (None,) * 5  # step, group, backend, scale, transport
        return grads["dq"].to(q.dtype), grads["dk"].to(k.dtype), grads["dv"].to(v.dtype), *no_grad


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, step: StepPlan,
              group: dist.ProcessGroup | None = None, *, backend: BackendChoice = "auto",
              softmax_scale: float | None = None, return_lse: bool = False,
              transport: str = "direct") -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Core attention over this rank's tokens, distributed as ``step`` plans it; differentiable in q, k, v.

    q: [rows, q_heads, head_dim], k and v: [rows, kv_heads, head_dim] (GQA), in ``step.dtype``, on one device: this
    rank's tokens in ``step.owned(rank)``'s row order, where rank is this process's rank in ``group``
    (None: the default group, whose size must be ``step.ranks``). Every rank of the group must call it
    with the same StepPlan, as it exchanges data with the others. Returns o, shaped like q; with
    ``return_lse`` also the log-sum-exp of each row's scores in FlashAttention's layout [q_heads, rows]
    (not differentiable). backend: ``auto``, ``fulcrum`` (C++ CPU kernels), ``torch`` (any device),
    ``flash`` (flash-attn, CUDA bf16), ``fa2`` (torch's built-in FlashAttention-2, CUDA bf16/fp16; torch >= 2.7),
    ``triton`` (Fulcrum's block-sparse Triton kernels, every mask; CUDA bf16/fp16), or a kernel backend object
    (``fulcrum.torch.KernelBackend``, e.g. one that wraps another to time its calls). auto: fulcrum on CPU, fa2 for
    CUDA bf16/fp16, torch for CUDA fp32. softmax_scale defaults to 1/sqrt(head_dim). transport: ``direct``
    (tensors sent where they live: NCCL for CUDA, gloo for CPU) or ``staged`` (through host memory over gloo:
    several processes sharing one GPU). Bad input raises fulcrum.InputError naming the argument.
    """
    _check_inputs(q, k, v, step, group, transport)
    select_backend(backend, q.device, q.dtype)  # refuse a backend that cannot run these tensors before any traffic
    scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(step.head_dim)
    if not (math.isfinite(scale) and scale > 0):
        raise _core.InputError(f"softmax_scale = {softmax_scale}: must be a finite number > 0")
    o, lse = cast(tuple[torch.Tensor, torch.Tensor],
                  _Attention.apply(q, k, v, step, group, backend, scale, transport))
    if return_lse:
        return o, lse.T.contiguous()
    return o
