"""StepPlan: the forward and backward Plans of one Assignment, parsed once, which fulcrum.torch.attention runs."""
from __future__ import annotations

import torch

from .. import _core
from .program import Document, OwnedRows, parse_plan, require_verified

_DTYPE_BYTES = {torch.float32: 4, torch.bfloat16: 2}


class StepPlan:
    """The forward and the backward Plan compiled from one Assignment for one head layout.

    Every rank builds the same StepPlan (planning and compiling are deterministic, so each rank may plan
    the batch itself). Plan rank r is process-group rank r. Rank r's q, k, v rows are the tokens of the
    Assignment's batch segments placed on r, in segment order (``owned(r)`` lists them); documents are
    indexed as in ``assignment.batch.documents``. Plans from bytes or dicts (say, rank 0's plans sent to
    the others) are verified here first (``verify_plan``); one that fails raises InputError.
    """

    def __init__(self, forward: _core.Plan, backward: _core.Plan) -> None:
        for plan in (forward, backward):
            require_verified(plan)
        if forward.pass_ != "forward" or backward.pass_ != "backward":
            raise _core.InputError(f"StepPlan(forward, backward): got a {forward.pass_} and a {backward.pass_} plan")
        self.forward_plan = forward
        self.backward_plan = backward
        self._forward = parse_plan(forward)
        self._backward = parse_plan(backward)
        f, b = self._forward, self._backward
        same = ((f.q_heads, f.kv_heads, f.head_dim, f.dtype_bytes, f.ranks) ==
                (b.q_heads, b.kv_heads, b.head_dim, b.dtype_bytes, b.ranks)
                and [str(d.mask) for d in f.documents] == [str(d.mask) for d in b.documents]
                and all(pf.owned == pb.owned for pf, pb in zip(f.programs, b.programs, strict=True)))
        if not same:
            raise _core.InputError("StepPlan(forward, backward): the plans were compiled from different assignments "
                                   "or head layouts")
        if f.mode == "signal":
            raise _core.InputError("mode = 'signal': its messages carry 1 byte, not data; use pingpong or "
                                   "single-stream")

    @property
    def ranks(self) -> int:
        return self._forward.ranks

    @property
    def q_heads(self) -> int:
        return self._forward.q_heads

    @property
    def kv_heads(self) -> int:
        return self._forward.kv_heads

    @property
    def head_dim(self) -> int:
        return self._forward.head_dim

    @property
    def dtype(self) -> torch.dtype:
        """The dtype of q, k, v and o: float32 or bfloat16 (LSE, gradient buffers and accumulation are fp32)."""
        return torch.bfloat16 if self._forward.dtype_bytes == 2 else torch.float32

    @property
    def planner(self) -> str:
        return self._forward.planner

    @property
    def mode(self) -> str:
        return self._forward.mode

    @property
    def documents(self) -> tuple[Document, ...]:
        """Length, mask and per-head masks of each document (``assignment.batch.documents``' order)."""
        return self._forward.documents

    def owned(self, rank: int) -> tuple[OwnedRows, ...]:
        """Which document tokens rank ``rank``'s rows hold: (doc, begin, end, row) pieces, in row order."""
        self._check_rank(rank)
        return self._forward.programs[rank].owned

    def rows(self, rank: int) -> int:
        """How many rows rank ``rank``'s q, k, v (and o) have."""
        self._check_rank(rank)
        return self._forward.programs[rank].owned_rows

    def _check_rank(self, rank: int) -> None:
        if not 0 <= rank < self.ranks:
            raise _core.InputError(f"rank = {rank}: must be in [0, {self.ranks})")

    def __repr__(self) -> str:
        return (f"StepPlan(planner='{self.planner}', mode='{self.mode}', ranks={self.ranks}, q_heads={self.q_heads}, "
                f"kv_heads={self.kv_heads}, head_dim={self.head_dim})")


def compile_step(assignment: _core.Assignment, model: _core.ModelShape, *, mode: str = "pingpong",
                 dtype: torch.dtype = torch.float32) -> StepPlan:
    """Compiles ``assignment`` (any planner's) for ``model``'s heads into the StepPlan attention() runs.

    mode: ``pingpong`` (two nano-batches, or the planner's divisions, so traffic hides behind compute) or
    ``single-stream``. dtype: the dtype of q, k, v and o, torch.float32 or torch.bfloat16 (messages then
    carry bf16 rows; LSE and gradients stay fp32 inside, gradients are returned in the inputs' dtype).
    """
    dtype_bytes = _DTYPE_BYTES.get(dtype)
    if dtype_bytes is None:
        raise _core.InputError(f"dtype = {dtype}: must be torch.float32 or torch.bfloat16")
    forward = _core.compile_plan(assignment, model, "forward", mode, dtype_bytes)
    backward = _core.compile_plan(assignment, model, "backward", mode, dtype_bytes)
    return StepPlan(forward, backward)
