"""CommLaunch and CommWait over a torch.distributed process group.

A launch posts its transfers (program.Transfer: per peer, the launch's receives and its sends, each packed
in the plan's posting order, on which verify_plan checks both sides of every rank pair agree) as one
``batch_isend_irecv`` and returns at once; the matching wait completes them. Compute the Program places
between the two overlaps the traffic. Plan rank r is group rank r; torch's P2P API takes global ranks, so
peers are mapped once per group.

A transfer of one slice sends or receives the buffer's rows in place (a row range of a token-major
buffer is contiguous). A transfer of several slices is gathered: the sender concatenates their bytes, the
receiver receives into a staging tensor and scatters it into the slices when the wait returns.

Two Programs may be in flight at once on one group (fulcrum.torch.PingPong runs two nano-batches' plans
interleaved), and each plan numbers its tags from 0, so a GroupComm puts its tags in a **lane**: the wire
tag is ``tag * lanes + lane``, and messages of concurrent runs on different lanes never match each
other under gloo or MPI (NCCL matches by posting order, which the schedule keeps identical on every rank).

The **staged** transport (``transport="staged"``, off by default) moves CUDA tensors over a gloo group: every
transfer is gathered through host memory (pinned where CUDA is up), sent from it and received into it, and a
receive is copied onto the device when its wait returns. NCCL refuses two ranks on one GPU and gloo cannot
send CUDA tensors point to point, so this is how several processes sharing one GPU run the real CUDA
kernels with real messages (tests, and bench/gpu_acceptance.sh); it costs a device-to-host copy per send.

Every wait is timed (two perf_counter reads) into the process's ``WAIT_CLOCK``: the time a rank sits
blocked for messages, i.e. communication that compute did not hide. ``measure_waits`` reads it.
"""
from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from .. import _core
from .program import Slice, Transfer


def slice_view(buffers: Sequence[torch.Tensor], s: Slice) -> torch.Tensor:
    """The slice as a view: rows, and of each row its heads (strided when it holds only some heads)."""
    rows = buffers[s.buffer][s.row : s.row + s.rows]
    return rows if s.heads is None else rows[:, s.heads[0] : s.heads[1]]


def _bytes_of(t: torch.Tensor) -> torch.Tensor:
    """A contiguous tensor's storage as a flat uint8 view (no copy)."""
    return t.reshape(-1).view(torch.uint8)


@dataclass
class WaitTime:
    """Seconds spent blocked in CommWaits and how many waits there were."""

    seconds: float = 0.0
    waits: int = 0


TRANSPORTS = ("direct", "staged")  # direct: tensors sent where they live; staged: through host memory

WAIT_CLOCK = WaitTime()  # this process's running total: always on, it costs two clock reads per wait


@contextmanager
def measure_waits() -> Iterator[WaitTime]:
    """``with measure_waits() as w: ...``: afterwards ``w`` holds the wait time of this process inside the block
    (every fulcrum.torch Program's waits: attention, PingPong, both passes if backward runs inside)."""
    before = WaitTime(WAIT_CLOCK.seconds, WAIT_CLOCK.waits)
    measured = WaitTime()
    try:
        yield measured
    finally:
        measured.seconds = WAIT_CLOCK.seconds - before.seconds
        measured.waits = WAIT_CLOCK.waits - before.waits


@dataclass
class PendingLaunch:
    works: list[dist.Work]
    # Receives that land in a staging tensor, to scatter into their views when the wait returns: (staging
    # bytes, destination views).
    to_scatter: list[tuple[torch.Tensor, list[torch.Tensor]]] = field(default_factory=list)
    # Send tensors gathered for this launch: kept alive until the wait, as the backend may read them until then.
    keep: list[torch.Tensor] = field(default_factory=list)

    def wait(self) -> None:
        # Only the blocking part is timed: the scattering below is a copy (compute), not waiting.
        start = time.perf_counter()
        for work in self.works:
            work.wait()
        WAIT_CLOCK.seconds += time.perf_counter() - start
        WAIT_CLOCK.waits += 1
        for staging, views in self.to_scatter:
            offset = 0
            for view in views:  # a strided (head-sliced) view is written through, element by element
                n = view.numel() * view.element_size()
                view.copy_(staging[offset : offset + n].view(view.dtype).view(view.shape))
                offset += n


def check_transport(transport: object) -> None:
    if transport not in TRANSPORTS:
        raise _core.InputError(f"transport = {transport!r}: must be one of {', '.join(TRANSPORTS)}")


def _host_bytes(n: int) -> torch.Tensor:
    """A host staging buffer: pinned when CUDA is up (copies to and from the GPU then run at full speed)."""
    return torch.empty(n, dtype=torch.uint8, pin_memory=torch.cuda.is_available())


def _gather_into(host: torch.Tensor, views: Sequence[torch.Tensor]) -> None:
    """The views' bytes, one after another, into ``host``; returns once they are there (gloo reads it at once)."""
    offset = 0
    for view in views:
        n = view.numel() * view.element_size()
        host[offset : offset + n].copy_(_bytes_of(view.contiguous()))
        offset += n


_nccl_ready: set[dist.ProcessGroup] = set()


class GroupComm:
    """Posts transfers on ``group`` (None: the default group); plan ranks are group ranks. Tags go on lane
    ``lane`` of ``lanes`` (see the module's note); every rank must use the same lanes for one run. ``transport``:
    one of TRANSPORTS (the module's note)."""

    def __init__(self, group: dist.ProcessGroup | None, *, lane: int = 0, lanes: int = 1,
                 transport: str = "direct") -> None:
        if not 0 <= lane < lanes:
            raise _core.Error(f"GroupComm: lane = {lane} must be in [0, {lanes})")
        check_transport(transport)
        self.staged = transport == "staged"
        self.group = group
        self.lane, self.lanes = lane, lanes
        pg = group if group is not None else dist.group.WORLD
        assert pg is not None, "torch.distributed is not initialised"
        self.rank = dist.get_rank(group)
        self.size = dist.get_world_size(group)
        self._global = [dist.get_global_rank(pg, r) for r in range(self.size)]
        # NCCL: the first batch_isend_irecv on a group must involve every rank of it, which a launch need
        # not; one barrier first creates the group's communicator collectively (every rank runs the same
        # number of attention calls, so every rank reaches it). gloo needs nothing.
        if dist.get_backend(group) == "nccl" and pg not in _nccl_ready:
            dist.barrier(group)
            _nccl_ready.add(pg)

    def launch(self, transfers: Sequence[Transfer], buffers: Sequence[torch.Tensor]) -> PendingLaunch:
        pending = PendingLaunch(works=[])
        ops: list[dist.P2POp] = []
        for t in transfers:
            views = [slice_view(buffers, s) for s in t.slices if s.rows > 0]
            if not views:
                continue  # both sides see the same empty transfer in the plan and skip it
            if self.staged:
                tensor = _host_bytes(sum(v.numel() * v.element_size() for v in views))
                if t.send:
                    _gather_into(tensor, views)
                    pending.keep.append(tensor)
                else:
                    pending.to_scatter.append((tensor, views))
            elif len(views) == 1 and views[0].is_contiguous():
                tensor = views[0]  # whole rows: sent from, or received into, the buffer itself
            elif t.send:
                tensor = torch.cat([_bytes_of(v.contiguous()) for v in views])
                pending.keep.append(tensor)
            else:
                tensor = torch.empty(sum(v.numel() * v.element_size() for v in views), dtype=torch.uint8,
                                     device=views[0].device)
                pending.to_scatter.append((tensor, views))
            op = dist.isend if t.send else dist.irecv
            ops.append(dist.P2POp(op, tensor, self._global[t.peer], self.group, t.tag * self.lanes + self.lane))
        if ops:
            pending.works = dist.batch_isend_irecv(ops)
        return pending
