"""Core attention as two autograd ops, ``start`` and ``finish``, so other work runs while its messages fly.

``attention_start(q, k, v, handle)`` posts the forward Program's first segment (its dispatch launches and
the local copies) and returns a 0-element *token*; ``attention_finish(token, handle)`` completes the
Program and returns o. The token carries no data: it only makes ``finish`` depend on ``start`` in the
autograd graph. In backward the roles swap: autograd reaches ``finish`` first (it is later in the graph),
whose backward posts the backward Program's first segment with dO; ``start``'s backward completes it and
returns dq, dk, dv. Whatever autograd runs between the two (the other nano-batch's layers) overlaps the
backward traffic as well.

Two runs may be in flight on a rank at once, one per lane (nano-batch). ``InFlight`` holds them; when a
run is completed, each time it would block on a wait the *other* lane's run gets one segment first
(completing its oldest wait, running its attention, posting its next launch). So in forward one
nano-batch's attention compute hides the other's return traffic, as DistCA's ping-pong does. The order is
fixed by the program, never by timing, so every rank posts its launches in the same order (NCCL needs
that; gloo matches by tag, and the lanes keep the two runs' tags apart).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import torch

from .. import _core
from .backends import KernelBackend
from .comm import GroupComm
from .executor import ProgramRun
from .step import StepPlan


class InFlight:
    """The ProgramRuns in progress on this rank, by lane; one schedule (one PingPong call) shares one."""

    def __init__(self) -> None:
        self.runs: dict[int, ProgramRun] = {}

    def start(self, lane: int, run: ProgramRun) -> None:
        if lane in self.runs:
            raise _core.Error(f"fulcrum.torch: lane {lane} already has a Program in flight")
        self.runs[lane] = run
        run.advance()

    def finish(self, lane: int) -> dict[str, torch.Tensor]:
        """Completes lane ``lane``'s run, giving the other lane's run one segment before each of its waits."""
        run = self.runs.pop(lane)
        run.advance()  # the run is parked at a wait: complete it and run on to the next
        while not run.done:
            for other in list(self.runs.values()):
                if not other.done:
                    other.advance()
            run.advance()
        return run.finish()


class AttentionHandle:
    """What one nano-batch's attention in one layer shares between its start and finish ops, both passes."""

    def __init__(self, step: StepPlan, kernels: KernelBackend, comm: GroupComm, scale: float, flight: InFlight,
                 label: str, trace: Callable[[str], None] | None) -> None:
        self.step, self.kernels, self.comm, self.scale = step, kernels, comm, scale
        self.flight, self.label, self.trace = flight, label, trace
        # q, k, v, then o and lse: the backward Program's inputs. They live as long as the graph holds the
        # handle (freed with it after backward; kept for backward(retain_graph=True)).
        self.inputs: dict[str, torch.Tensor] = {}

    def run(self, pass_: str, inputs: dict[str, torch.Tensor]) -> ProgramRun:
        plan = self.step._forward if pass_ == "forward" else self.step._backward
        return ProgramRun(plan, inputs, self.kernels, self.comm, self.scale, trace=self.trace,
                          label=f"{self.label} {pass_}")


class _Start(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, handle: AttentionHandle) -> torch.Tensor:
        handle.inputs = {"q": q.detach().contiguous(), "k": k.detach().contiguous(), "v": v.detach().contiguous()}
        handle.flight.start(handle.comm.lane, handle.run("forward", handle.inputs))
        ctx.handle = handle
        return q.new_empty(0)

    @staticmethod
    def backward(ctx: Any, _grad_token: torch.Tensor) -> tuple[Any, ...]:
        handle: AttentionHandle = ctx.handle
        grads = handle.flight.finish(handle.comm.lane)
        q, k, v = handle.inputs["q"], handle.inputs["k"], handle.inputs["v"]
        return grads["dq"].to(q.dtype), grads["dk"].to(k.dtype), grads["dv"].to(v.dtype), None


class _Finish(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, token: torch.Tensor, handle: AttentionHandle) -> torch.Tensor:
        out = handle.flight.finish(handle.comm.lane)
        handle.inputs.update(o=out["o"], lse=out["lse"])
        ctx.handle = handle
        ctx.token_like = token
        return out["o"]

    @staticmethod
    def backward(ctx: Any, grad_o: torch.Tensor) -> tuple[Any, ...]:
        handle: AttentionHandle = ctx.handle
        inputs = dict(handle.inputs, d_o=grad_o.contiguous().to(handle.inputs["o"].dtype))
        handle.flight.start(handle.comm.lane, handle.run("backward", inputs))
        return torch.zeros_like(ctx.token_like), None


def attention_start(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, handle: AttentionHandle) -> torch.Tensor:
    """Posts the forward Program's first segment; returns the token ``attention_finish`` takes."""
    return cast(torch.Tensor, _Start.apply(q, k, v, handle))


def attention_finish(token: torch.Tensor, handle: AttentionHandle) -> torch.Tensor:
    """Completes the forward Program that ``attention_start`` began; returns o (this rank's rows)."""
    return cast(torch.Tensor, _Finish.apply(token, handle))
