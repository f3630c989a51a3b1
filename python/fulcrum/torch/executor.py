"""The second interpreter of the Plan IR (the first is runtime/executor.cpp, over MPI): one rank's
Program run on torch tensors, on the user's device and process group.

Semantics are the C++ executor's: buffers start as the Program says (the caller's tensor for ``input``,
zeros, -inf, and zeros for ``undefined`` so a bug reads zeros, not garbage); instructions run in program
order (``ProgramRun`` runs them a segment at a time, ``run_program`` to the end); a launch posts its
messages and returns, its wait completes them; ``merge`` combines partial O/LSE by log-sum-exp (rows no
part sees stay O = 0, LSE = -inf), ``sum`` adds parts into the output; the buffers marked ``output`` are
the results. Buffers are token-major: [rows, heads, head_dim], LSE
[rows, q_heads]; Q, K, V, O and dO in the plan's dtype, LSE and gradients fp32.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import torch

from .. import _core
from .backends import KernelBackend
from .comm import GroupComm, PendingLaunch, slice_view
from .lse_merge import merge_by_lse
from .program import (
    STORED_FIELDS,
    Attention,
    AttentionBackward,
    Copy,
    Instruction,
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
    merged_o, merged_lse = merge_by_lse(torch.stack([slice_view(buffers, s) for s in r.parts]),
                                        torch.stack([slice_view(buffers, s) for s in r.part_lse]))
    out = slice_view(buffers, r.out)
    out.copy_(merged_o.to(out.dtype))
    slice_view(buffers, r.out_lse).copy_(merged_lse)


def _sum(buffers: Sequence[torch.Tensor], out: Slice, parts: Sequence[Slice]) -> None:
    target = slice_view(buffers, out)
    for part in parts:
        target.add_(slice_view(buffers, part))


class ProgramRun:
    """One rank's Program of a plan, run in segments so that a scheduler can put other work between them.

    A segment is everything up to the next Wait: ``advance()`` completes the Wait the run is parked at
    (blocking until its messages have arrived; none before the first segment), then runs the following
    instructions (posting launches, running compute whose data is here) and parks before the next Wait.
    What a caller does between two ``advance()`` calls overlaps the launches posted so far. The run owns
    its buffers; ``finish()`` runs the remaining segments and returns the output buffers by name.
    ``trace`` (optional) receives ``"<label> <event>"`` for every launch once posted ("launch <id>"), every
    wait as it begins and ends ("wait <id>", "waited <id>") and every attention call, in the order they run.
    """

    def __init__(self, plan: ParsedPlan, inputs: Mapping[str, torch.Tensor], backend: KernelBackend,
                 comm: GroupComm, scale: float, *, trace: Callable[[str], None] | None = None,
                 label: str = "") -> None:
        self._plan, self._backend, self._comm, self._scale = plan, backend, comm, scale
        self._program = plan.programs[comm.rank]
        device = next(iter(inputs.values())).device
        dtype = torch.bfloat16 if plan.dtype_bytes == 2 else torch.float32
        self._buffers = _allocate(plan, self._program, inputs, device, dtype)
        self._pending: dict[int, PendingLaunch] = {}
        self._next = 0  # index of the next instruction to run
        self._trace, self._label = trace, label

    @property
    def done(self) -> bool:
        return self._next == len(self._program.instructions)

    def advance(self) -> None:
        """Runs one segment: the Wait the run is parked at, if any, then up to the next Wait or the end."""
        instructions = self._program.instructions
        start = self._next
        while self._next < len(instructions):
            i = instructions[self._next]
            if isinstance(i, Wait) and self._next > start:
                return  # parked: the caller decides what runs before this wait blocks
            self._next += 1
            self._execute(i)

    def finish(self) -> dict[str, torch.Tensor]:
        """Runs the remaining segments; returns the output buffers by name."""
        while not self.done:
            self.advance()
        if self._pending:
            raise _core.Error(f"rank {self._comm.rank}: launches {sorted(self._pending)} were never waited for")
        return {b.name: self._buffers[index] for index, b in enumerate(self._program.buffers) if b.output}

    def _execute(self, i: Instruction) -> None:
        buffers = self._buffers
        if isinstance(i, Launch):
            self._pending[i.id] = self._comm.launch(i.transfers, buffers)
            self._note(f"launch {i.id}")
        elif isinstance(i, Wait):
            self._note(f"wait {i.launch}")
            self._pending.pop(i.launch).wait()
            self._note(f"waited {i.launch}")
        elif isinstance(i, Attention):
            self._note("attention")
            self._backend.forward(self._plan, i, buffers, self._scale)
        elif isinstance(i, AttentionBackward):
            self._note("attention-backward")
            self._backend.backward(self._plan, i, buffers, self._scale)
        elif isinstance(i, Copy):
            slice_view(buffers, i.dst).copy_(slice_view(buffers, i.src))
        elif i.op == "merge":
            _merge(buffers, i)
        else:
            _sum(buffers, i.out, i.parts)

    def _note(self, event: str) -> None:
        if self._trace is not None:
            self._trace(f"{self._label} {event}")


def run_program(plan: ParsedPlan, inputs: Mapping[str, torch.Tensor], backend: KernelBackend, comm: GroupComm,
                scale: float) -> dict[str, torch.Tensor]:
    """Runs this rank's (comm.rank's) Program of ``plan`` to the end and returns its output buffers by name."""
    return ProgramRun(plan, inputs, backend, comm, scale).finish()
