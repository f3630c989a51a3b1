"""Every rank must run the same StepPlan: a mismatch would pair the wrong messages and hang or corrupt.

Fulcrum's choice is that every rank plans the batch itself (planning and compiling are deterministic
functions of the batch and the options), on the PlanAheadLoader's worker thread, rather than one rank
planning and broadcasting the plan bytes: planning costs no traffic and no serialisation, it is hidden
behind the training step like any other loader work, and no rank waits for rank 0's planner. Measured
in docs/performance.md ("Sharing plans"; bench/plan_sharing.py): at 4 ranks x 16K tokens, DistCA plans and
compiles in well under a millisecond while a gloo broadcast of its plan bytes takes milliseconds.

What deterministic planning cannot rule out (different options, seeds or inputs on one rank) this check
catches cheaply: one all-gather of a 64-bit digest of the plan bytes.
"""
from __future__ import annotations

import hashlib

import torch
import torch.distributed as dist

from .. import _core
from .step import StepPlan


def step_digest(step: StepPlan) -> int:
    """A 63-bit digest of the forward and backward plans' bytes (equal plans, equal digests)."""
    h = hashlib.blake2b(digest_size=8)
    h.update(step.forward_plan.to_bytes())
    h.update(step.backward_plan.to_bytes())
    return int.from_bytes(h.digest(), "little") & (2**63 - 1)


def check_same_step(step: StepPlan, group: dist.ProcessGroup | None = None) -> None:
    """Raises fulcrum.Error on every rank, naming the ranks whose StepPlan differs from rank 0's.

    A collective: every rank of ``group`` must call it. The digest travels on the device the group's
    backend needs (CUDA for NCCL).
    """
    if not isinstance(step, StepPlan):
        raise _core.InputError(f"step: a {type(step).__name__}, not a fulcrum.torch.StepPlan")
    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend(group) == "nccl" else None
    mine = torch.tensor([step_digest(step)], dtype=torch.int64, device=device)
    every = [torch.empty_like(mine) for _ in range(dist.get_world_size(group))]
    dist.all_gather(every, mine, group=group)
    digests = [int(d.item()) for d in every]
    differ = [r for r, d in enumerate(digests) if d != digests[0]]
    if differ:
        raise _core.Error(f"ranks {differ} hold a different plan from rank 0's (planner '{step.planner}'): every rank "
                          "must plan the same batch with the same planner, options and seed")
