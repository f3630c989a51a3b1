"""Planning ahead, as DCP's data loader does: while batch i trains, batches i+1..i+k are planned.

The C++ planners release the GIL, so a worker thread plans in parallel with a training step that runs
Python (or waits on a device) in the main thread.
"""
from __future__ import annotations

import operator
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from types import TracebackType
from typing import Any, Literal, NamedTuple, Protocol

from . import _core
from .auto import AutoPlanner


class PlannedBatch(NamedTuple):
    # position in the stream of length lists (shadows tuple.index, which nobody calls on a PlannedBatch)
    index: int  # type: ignore[assignment]
    batch: _core.Batch  # the packed documents (ids are unique across the whole stream)
    assignment: _core.Assignment  # the planner's output for `batch`
    plan_s: float  # wall seconds the planner (and `prepare`) took, on the worker thread
    prepared: Any = None  # what the loader's `prepare(assignment)` returned, e.g. a fulcrum.torch StepPlan


_END = object()


class PlannerLike(Protocol):
    """What the loader needs of a planner: ``fulcrum.make_planner``'s result, or any object like it."""

    def plan(self, batch: _core.Batch) -> _core.Assignment: ...


def _length(batch: int, position: int, n: Any) -> int:
    """A document length as given (an int or a NumPy integer); anything else, 1.5 included, is refused by name."""
    try:
        return operator.index(n)
    except TypeError:
        raise _core.InputError(f"lengths[{batch}][{position}] = {n!r}: must be a whole number of tokens") from None


class PlanAheadLoader:
    """Iterates PlannedBatch for each item of ``lengths``, planned up to ``depth`` batches ahead.

    An item is a list of document lengths, packed with ``pack_batch`` as ``boundary_split`` says (lengths
    that do not fit raise ``InputError`` naming the item: nothing is dropped), or a ``Batch`` the data
    loader already laid out (``Batch.from_cu_seqlens``), planned as it is.

    ``planner`` is a planner name (``fulcrum.planner_names()``, or a meta-planner: ``"auto"``, an ``AutoPlanner`` on
    h200-dgx) built with ``options``, or any object with a ``plan(batch)`` method (an ``AutoPlanner`` made
    with other hardware or candidates). One planner serves the whole stream, in order, so stateful planners (wlb)
    see the batches as they would in a serial loop. ``prepare``, if given, runs on the worker thread too, on
    each Assignment, and its result arrives as ``PlannedBatch.prepared``: e.g. ``lambda a:
    fulcrum.torch.compile_step(a, model)``, so compiling is also off the training step's path. Errors raised
    while planning are re-raised by the
    iterator at the batch where they happened. Use as a context manager (or call ``close``) to stop the
    worker early.
    """

    def __init__(
        self,
        lengths: Iterable[Sequence[int] | _core.Batch],
        planner: str | PlannerLike,
        *,
        ranks: int,
        tokens_per_rank: int,
        options: _core.PlannerOptions | None = None,
        mask: str = "causal",
        boundary_split: Literal["contiguous", "head-tail"] = "contiguous",
        depth: int = 2,
        verify: bool = False,
        prepare: Callable[[_core.Assignment], Any] | None = None,
    ) -> None:
        if depth < 1:
            raise _core.InputError(f"depth = {depth}: must be >= 1")
        if isinstance(planner, str):
            if options is None:
                options = _core.PlannerOptions(_core.model_shape("llama3-8b"))
            planner = AutoPlanner(options) if _core.is_meta_planner(planner) else _core.make_planner(planner, options)
        self._planner: PlannerLike = planner
        self._lengths = iter(lengths)
        self._ranks = ranks
        self._tokens_per_rank = tokens_per_rank
        self._mask = _core.Mask(mask)
        # Packing nothing checks ranks, tokens_per_rank and boundary_split here, not at the first batch.
        _core.pack_batch([], ranks, tokens_per_rank, boundary_split=boundary_split)
        self._boundary_split = boundary_split
        self._verify = verify
        self._prepare = prepare
        # `depth` permits: the worker takes one before planning a batch and the consumer returns one when
        # it takes a batch, so at most `depth` planned batches wait while the current one trains.
        self._slots = threading.Semaphore(depth)
        self._ready: queue.Queue[PlannedBatch | BaseException | object] = queue.Queue()
        self._stop = threading.Event()
        self._worker = threading.Thread(target=self._run, name="fulcrum-plan-ahead", daemon=True)
        self._worker.start()

    def _run(self) -> None:
        next_id = 0
        try:
            for index, lengths in enumerate(self._lengths):
                while not self._slots.acquire(timeout=0.05):
                    if self._stop.is_set():
                        return
                if self._stop.is_set():
                    return
                start = time.perf_counter()
                if isinstance(lengths, _core.Batch):  # laid out by the caller, e.g. Batch.from_cu_seqlens
                    batch = lengths
                    if batch.ranks != self._ranks:
                        raise _core.InputError(
                            f"lengths[{index}]: a Batch of {batch.ranks} ranks, but the loader plans for "
                            f"ranks = {self._ranks}"
                        )
                else:
                    docs = [_core.Document(next_id + i, _length(index, i, n), self._mask)
                            for i, n in enumerate(lengths)]
                    next_id += len(docs)
                    try:
                        batch = _core.pack_batch(docs, self._ranks, self._tokens_per_rank,
                                                 boundary_split=self._boundary_split)
                    except _core.InputError as error:  # nothing is dropped: say which batch does not fit
                        raise _core.InputError(f"lengths[{index}]: {error}") from error
                assignment = self._planner.plan(batch)
                if self._verify:
                    report = _core.verify(assignment)
                    if not report.ok:
                        raise _core.Error(f"batch {index}: the plan fails verification: {report.summary()}")
                prepared = self._prepare(assignment) if self._prepare is not None else None
                self._ready.put(PlannedBatch(index, batch, assignment, time.perf_counter() - start, prepared))
        except BaseException as error:  # handed to the consumer, raised where it iterates
            self._ready.put(error)
        self._ready.put(_END)

    def __iter__(self) -> Iterator[PlannedBatch]:
        while True:
            item = self._ready.get()
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise item
            assert isinstance(item, PlannedBatch)
            self._slots.release()
            yield item

    def close(self) -> None:
        """Stops the worker after the batch it is planning (a C++ call cannot be interrupted)."""
        self._stop.set()
        self._worker.join()

    def __enter__(self) -> PlanAheadLoader:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()
