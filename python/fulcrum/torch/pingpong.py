"""PingPong: a stack of decoder layers run on one micro-batch as two nano-batches, DistCA's layer schedule.

While nano-batch A's attention messages are in flight, this rank computes nano-batch B's
context-independent layers (and the reverse); the post-attention part of layer l (O projection, MLP) and
the pre-attention part of layer l+1 (norm, QKV projection) run back to back, with no attention between
them. Forward order, per rank, with ``start``/``finish`` the two halves of distributed attention
(split_attention.py):

    pre(A,0) start(A,0) pre(B,0) start(B,0)
    finish(A,0) post(A,0) pre(A,1) start(A,1)  finish(B,0) post(B,0) pre(B,1) start(B,1)  finish(A,1) ...

and inside ``finish(A,l)``, before A blocks on its return messages, B's attention runs (its dispatch wait,
its attention, its return launch). Backward follows from autograd: ``finish``'s backward posts the backward
Program's first messages, ``start``'s backward completes them. The CPU autograd engine runs, of the nodes
whose gradients are ready, the one created last (highest sequence number); the other nano-batch's nodes
created between this nano-batch's ``start`` and ``finish`` therefore run between their backwards:

    post'(B,1) finish'(B,1) post'(A,1) finish'(A,1) start'(B,1) pre'(B,1) post'(B,0) finish'(B,0) start'(A,1) ...

(test_torch_pingpong.py asserts this order, and the instructions inside it, on every rank).

The layer protocol (duck-typed; nn.Modules among ``layers`` are registered as submodules):

    pre_attention(x, context) -> (q, k, v, saved)   # x: [rows, ...]; q [rows, q_heads, head_dim], k, v GQA
    post_attention(o, saved, context) -> x          # o like q; returns the next layer's input

``context`` is whatever the caller passes per nano-batch (e.g. RoPE's cos and sin for its rows), since one
layer object serves both nano-batches. A Llama block (norm → QKV → RoPE → attention → O → residual → norm →
SwiGLU → residual) splits at attention (python/tests/test_torch_pingpong.py's ``LlamaBlock`` wraps
python/examples/llama_model.py's ``Block`` this way and checks it against the model's own forward):

    def pre_attention(self, x, rope):                # rope = (cos, sin) of the nano-batch's rows
        h = self.attention_norm(x)
        q = apply_rope(self.q_proj(h).view(len(x), q_heads, head_dim), *rope)
        k = apply_rope(self.k_proj(h).view(len(x), kv_heads, head_dim), *rope)
        return q, k, self.v_proj(h).view(len(x), kv_heads, head_dim), x
    def post_attention(self, o, x, rope):
        x = x + self.o_proj(o.flatten(1))
        return x + self.mlp(self.mlp_norm(x))
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import torch
import torch.distributed as dist

from .. import _core
from .backends import BackendChoice, select_backend
from .comm import GroupComm, check_transport
from .function import _check_inputs
from .split_attention import AttentionHandle, InFlight, attention_finish, attention_start
from .step import StepPlan

SCHEDULES = ("pingpong", "sequential")
NANO_BATCHES = "AB"


class PingPongLayer(Protocol):
    def pre_attention(self, x: torch.Tensor, context: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, Any]:
        ...

    def post_attention(self, o: torch.Tensor, saved: Any, context: Any) -> torch.Tensor: ...


def _check_steps(steps: Any) -> tuple[StepPlan, StepPlan]:
    if not isinstance(steps, (tuple, list)) or len(steps) != 2 or not all(isinstance(s, StepPlan) for s in steps):
        raise _core.InputError("steps: must be a pair (step_a, step_b) of fulcrum.torch.StepPlan "
                               "(plan_nano_batches builds one)")
    a, b = steps
    layout = ("ranks", "q_heads", "kv_heads", "head_dim", "dtype")
    differ = [name for name in layout if getattr(a, name) != getattr(b, name)]
    if differ:
        raise _core.InputError(f"steps: the two nano-batches' plans differ in {', '.join(differ)} "
                               f"({a!r} vs {b!r}); plan both for one group and one model")
    return a, b


class PingPong(torch.nn.Module):
    """Runs ``layers`` (the PingPongLayer protocol, module docstring) on this rank's rows of a micro-batch.

    group: the process group the plans are for (None: the default group); backend, softmax_scale, transport: as
    in fulcrum.torch.attention. trace (optional) receives the executor's events ("A0 forward launch 0", ...:
    nano-batch, layer, pass, instruction) in the order they run, for tests and debugging.
    """

    def __init__(self, layers: Sequence[PingPongLayer], group: dist.ProcessGroup | None = None, *,
                 backend: BackendChoice = "auto", softmax_scale: float | None = None,
                 trace: Callable[[str], None] | None = None, transport: str = "direct") -> None:
        super().__init__()
        check_transport(transport)
        if not layers or not all(callable(getattr(layer, m, None)) for layer in layers
                                 for m in ("pre_attention", "post_attention")):
            raise _core.InputError("layers: must be a non-empty sequence of objects with pre_attention(x, context) "
                                   "and post_attention(o, saved, context)")
        self.layers: tuple[PingPongLayer, ...] = tuple(layers)
        # Registered so that .parameters(), .to() and state_dict() see the layers that are modules.
        self.layer_modules = torch.nn.ModuleList(m for m in layers if isinstance(m, torch.nn.Module))
        self.group, self.backend, self.softmax_scale, self.trace = group, backend, softmax_scale, trace
        self.transport = transport

    def forward(self, x: torch.Tensor, steps: tuple[StepPlan, StepPlan],
                contexts: tuple[Any, Any] = (None, None), *, schedule: str = "pingpong") -> torch.Tensor:
        """x: this rank's rows, step_a's rows then step_b's ([step_a.rows(r) + step_b.rows(r), ...]); returns
        the last layer's output for the same rows. contexts: each nano-batch's context for the layers.
        schedule: ``pingpong`` (interleaved) or ``sequential`` (A's whole stack, then B's: the baseline)."""
        step_a, step_b = _check_steps(steps)
        if schedule not in SCHEDULES:
            raise _core.InputError(f"schedule = '{schedule}': must be one of {', '.join(SCHEDULES)}")
        if not isinstance(contexts, (tuple, list)) or len(contexts) != 2:
            raise _core.InputError("contexts: must be a pair (context_a, context_b)")
        if not isinstance(x, torch.Tensor):
            raise _core.InputError(f"x: a {type(x).__name__}, not a torch.Tensor")
        if not dist.is_available() or not dist.is_initialized():
            raise _core.InputError("group: torch.distributed is not initialised (call init_process_group first)")
        if dist.get_world_size(self.group) != step_a.ranks:
            raise _core.InputError(f"group: {dist.get_world_size(self.group)} processes, but the plans are for "
                                   f"{step_a.ranks} ranks")
        rank = dist.get_rank(self.group)
        rows = (step_a.rows(rank), step_b.rows(rank))
        if x.dim() < 1 or x.shape[0] != sum(rows):
            raise _core.InputError(f"x: shape {tuple(x.shape)}, but rank {rank} holds {rows[0]} + {rows[1]} rows "
                                   "(step_a's, then step_b's)")
        xs = list(torch.split(x, list(rows)))
        # One tag lane per nano-batch.
        comms = [GroupComm(self.group, lane=n, lanes=2, transport=self.transport) for n in range(2)]
        run = self._pingpong if schedule == "pingpong" else self._sequential
        return torch.cat(run(xs, (step_a, step_b), contexts, comms))

    def _scale(self, step: StepPlan) -> float:
        scale = self.softmax_scale if self.softmax_scale is not None else 1.0 / math.sqrt(step.head_dim)
        if not (math.isfinite(scale) and scale > 0):
            raise _core.InputError(f"softmax_scale = {self.softmax_scale}: must be a finite number > 0")
        return scale

    def _sequential(self, xs: list[torch.Tensor], steps: tuple[StepPlan, StepPlan], contexts: Sequence[Any],
                    comms: Sequence[GroupComm]) -> list[torch.Tensor]:
        # The same attention ops as _pingpong, one Program in flight at a time: only the order differs.
        flight = InFlight()
        for n in range(2):
            for index, layer in enumerate(self.layers):
                q, k, v, saved = layer.pre_attention(xs[n], contexts[n])
                handle = self._handle(n, index, q, k, v, steps[n], comms[n], flight)
                o = attention_finish(attention_start(q, k, v, handle), handle)
                xs[n] = layer.post_attention(o, saved, contexts[n])
        return xs

    def _handle(self, n: int, index: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, step: StepPlan,
                comm: GroupComm, flight: InFlight) -> AttentionHandle:
        _check_inputs(q, k, v, step, self.group, self.transport)
        kernels = select_backend(self.backend, q.device, q.dtype)
        return AttentionHandle(step, kernels, comm, self._scale(step), flight, f"{NANO_BATCHES[n]}{index}", self.trace)

    def _pingpong(self, xs: list[torch.Tensor], steps: tuple[StepPlan, StepPlan], contexts: Sequence[Any],
                  comms: Sequence[GroupComm]) -> list[torch.Tensor]:
        flight = InFlight()
        pending: list[tuple[torch.Tensor, AttentionHandle, Any]] = []  # per nano-batch: started, not finished

        def pre_and_start(n: int, index: int) -> None:
            q, k, v, saved = self.layers[index].pre_attention(xs[n], contexts[n])
            handle = self._handle(n, index, q, k, v, steps[n], comms[n], flight)
            entry = (attention_start(q, k, v, handle), handle, saved)
            if n < len(pending):
                pending[n] = entry
            else:
                pending.append(entry)

        for n in range(2):
            pre_and_start(n, 0)
        for index, layer in enumerate(self.layers):
            for n in range(2):
                token, handle, saved = pending[n]
                o = attention_finish(token, handle)
                xs[n] = layer.post_attention(o, saved, contexts[n])
                if index + 1 < len(self.layers):
                    pre_and_start(n, index + 1)
        return xs
