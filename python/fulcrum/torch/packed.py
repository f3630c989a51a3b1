"""Packed documents on one rank, and the attention-callable interface models call.

A rank's input is one flat sequence of rows: pieces of documents, each a token range of one document at
consecutive rows (``PackedRows``, the same pieces as a compiled Plan's ``owned`` list). Attention runs only
within a document, so a model layer cannot compute it from its rows alone; it calls a ``PackedAttention``:

    o = attention(q, k, v, scale=scale)   # q [rows, q_heads, head_dim], k, v [rows, kv_heads, head_dim]

which returns o [rows, q_heads, head_dim] for the same rows. ``planned_attention(step, group)`` is the
distributed one (``fulcrum.torch.attention`` over a StepPlan on a process group, rows
``PackedRows.from_step(step, rank)``); ``reference_attention(rows)`` the single-process one (each
document's causal attention with torch SDPA), the baseline the distributed one is compared with. A model
takes the callable as an argument, so which one runs is decided in one place, by the training loop.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

import torch
import torch.distributed as dist

from .. import _core
from .backends import BackendChoice
from .function import attention
from .step import StepPlan


class PackedAttention(Protocol):
    """Core attention over one rank's packed rows; differentiable in q, k and v.

    q: [rows, q_heads, head_dim]; k, v: [rows, kv_heads, head_dim] (q_heads a multiple of kv_heads: GQA),
    rows in the order of the rank's ``PackedRows``; ``scale`` multiplies the scores (usually
    1/sqrt(head_dim)). Returns o: [rows, q_heads, head_dim].
    """

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, scale: float) -> torch.Tensor: ...


@dataclass(frozen=True)
class Piece:
    """Rows [row, row + end - begin) hold tokens [begin, end) of document ``doc``."""

    doc: int
    begin: int
    end: int
    row: int


class _PieceLike(Protocol):
    """A Plan's owned entry (``fulcrum.torch`` OwnedRows) or a Piece: anything with these four fields."""

    @property
    def doc(self) -> int: ...
    @property
    def begin(self) -> int: ...
    @property
    def end(self) -> int: ...
    @property
    def row(self) -> int: ...


class PackedRows:
    """Which document tokens a rank's rows hold: pieces in row order, covering rows [0, rows) once.

    ``doc_lengths[d]`` and ``doc_masks[d]`` (mask kinds, e.g. "causal") describe document d, indexed as in
    the Assignment's batch.
    """

    def __init__(self, pieces: Iterable[_PieceLike], doc_lengths: Sequence[int],
                 doc_masks: Sequence[str] | None = None) -> None:
        self.pieces = tuple(Piece(int(p.doc), int(p.begin), int(p.end), int(p.row)) for p in pieces)
        self.doc_lengths = tuple(int(n) for n in doc_lengths)
        self.doc_masks = tuple(doc_masks) if doc_masks is not None else ("causal",) * len(self.doc_lengths)
        if len(self.doc_masks) != len(self.doc_lengths):
            raise _core.InputError(f"doc_masks: {len(self.doc_masks)} masks for {len(self.doc_lengths)} documents")
        if "striped" in self.doc_masks:
            # Rows of a striped layout are slots of a permuted document: positions and next-token labels
            # would be the slots', silently wrong. MTraining shuffles into that layout around attention only.
            raise _core.InputError(
                f"documents[{self.doc_masks.index('striped')}] is stored permuted (a striped layout: mtraining, "
                "striped): its rows are not in position order, so model layers cannot run on them; "
                "fulcrum.torch.attention runs such plans, the layers need a contiguous layout (ring, zigzag, ...)")
        row = 0
        for i, p in enumerate(self.pieces):
            if not 0 <= p.doc < len(self.doc_lengths):
                raise _core.InputError(f"pieces[{i}].doc = {p.doc}: must be in [0, {len(self.doc_lengths)})")
            if not 0 <= p.begin < p.end <= self.doc_lengths[p.doc]:
                raise _core.InputError(f"pieces[{i}].tokens = [{p.begin}, {p.end}): must be a non-empty range inside "
                                       f"[0, {self.doc_lengths[p.doc]}) (document {p.doc})")
            if p.row != row:
                raise _core.InputError(f"pieces[{i}].row = {p.row}: must be {row} (pieces are in row order, "
                                       "without gaps)")
            row += p.end - p.begin
        self.rows = row

    @staticmethod
    def from_batch(batch: _core.Batch, rank: int) -> PackedRows:
        """Rank ``rank``'s rows of ``batch``: its segments in segment order, which is the order of a Plan's
        owned rows (pass the Assignment's batch: planners that defer or re-lay out documents own other rows
        than the input batch)."""
        if not 0 <= rank < batch.ranks:
            raise _core.InputError(f"rank = {rank}: must be in [0, {batch.ranks})")
        pieces, row = [], 0
        for s in batch.segments:
            if s.rank == rank and s.tokens[1] > s.tokens[0]:
                pieces.append(Piece(s.doc, s.tokens[0], s.tokens[1], row))
                row += s.tokens[1] - s.tokens[0]
        docs = batch.documents
        return PackedRows(pieces, [d.length for d in docs], [d.mask.kind for d in docs])

    @staticmethod
    def from_step(step: StepPlan, rank: int) -> PackedRows:
        """Rank ``rank``'s rows under a compiled StepPlan: its Programs' owned rows (``step.owned(rank)``)."""
        docs = step.documents
        return PackedRows(step.owned(rank), [d.length for d in docs], [d.mask.kind for d in docs])

    def positions(self, device: torch.device | str | None = None) -> torch.Tensor:
        """Each row's position in its document (int64 [rows]): RoPE's positions, restarting per document."""
        parts = [torch.arange(p.begin, p.end, dtype=torch.int64, device=device) for p in self.pieces]
        return torch.cat(parts) if parts else torch.empty(0, dtype=torch.int64, device=device)

    def __repr__(self) -> str:
        return f"PackedRows(rows={self.rows}, pieces={len(self.pieces)}, documents={len(self.doc_lengths)})"


def _document_order(rows: PackedRows) -> list[tuple[int, torch.Tensor]]:
    """Per document with local rows: (document, its rows ordered by position). Each document's local pieces
    must tile [0, end) exactly, so every key a local row sees is local: what one process can compute."""
    by_doc: dict[int, list[Piece]] = {}
    for p in rows.pieces:
        by_doc.setdefault(p.doc, []).append(p)
    order = []
    for doc, pieces in by_doc.items():
        pieces.sort(key=lambda p: p.begin)
        expected = 0
        for p in pieces:
            if p.begin != expected:
                raise _core.InputError(
                    f"reference attention: document {doc}'s tokens [{expected}, {p.begin}) are not on this rank "
                    f"(it holds [{p.begin}, {p.end}) at row {p.row}); split documents need fulcrum.torch.attention")
            expected = p.end
        order.append((doc, torch.cat([torch.arange(p.row, p.row + p.end - p.begin) for p in pieces])))
    return order


def _check_operands(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, rows: int) -> None:
    if q.dim() != 3 or q.shape[0] != rows:
        raise _core.InputError(f"q: shape {tuple(q.shape)}: must be [{rows} rows, q_heads, head_dim]")
    for name, t in (("k", k), ("v", v)):
        if t.dim() != 3 or t.shape[0] != rows or t.shape[2] != q.shape[2]:
            raise _core.InputError(f"{name}: shape {tuple(t.shape)}: must be [{rows} rows, kv_heads, {q.shape[2]}]")
    if k.shape[1] != v.shape[1] or k.shape[1] == 0 or q.shape[1] % k.shape[1] != 0:
        raise _core.InputError(f"heads: q has {q.shape[1]}, k {k.shape[1]}, v {v.shape[1]}: k and v must have the "
                               "same number, and it must divide q's")


class ReferenceAttention:
    """Single-process packed attention: per document, causal SDPA over its rows.

    It needs every key a row sees on this process (true for one rank, or for planners that keep documents
    whole); rows of a document split across ranks raise InputError. Causal masks only.
    """

    def __init__(self, rows: PackedRows) -> None:
        for p in rows.pieces:
            if rows.doc_masks[p.doc] != "causal":
                raise _core.InputError(f"document {p.doc}: mask '{rows.doc_masks[p.doc]}': the reference attention "
                                       "runs causal masks only")
        self.rows = rows
        order = _document_order(rows)
        self._lengths = [len(index) for _, index in order]
        # Rows in per-document order: one gather and one split, whose backward passes are one scatter and one
        # concatenation. (A gather per document would cost a zero-filled gradient of all rows per document.)
        self._permutation = torch.cat([index for _, index in order]) if order else torch.empty(0, dtype=torch.int64)
        self._inverse = torch.argsort(self._permutation)  # packed row -> its place in the per-document order

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, scale: float) -> torch.Tensor:
        _check_operands(q, k, v, self.rows.rows)
        if not self._lengths:
            return q.new_zeros(q.shape)
        group = q.shape[1] // k.shape[1]
        permutation = self._permutation.to(q.device)
        per_document = zip(*(torch.split(t.index_select(0, permutation), self._lengths) for t in (q, k, v)),
                           strict=True)
        outputs = []
        for qd, kd, vd in per_document:
            # [heads, n, head_dim], SDPA's layout; each kv head repeated for its group of q heads (SDPA's
            # enable_gqa would avoid the copy but needs torch 2.5).
            kd, vd = (t.repeat_interleave(group, dim=1).transpose(0, 1) for t in (kd, vd))
            od = torch.nn.functional.scaled_dot_product_attention(qd.transpose(0, 1), kd, vd, is_causal=True,
                                                                  scale=scale)
            outputs.append(od.transpose(0, 1))
        return torch.cat(outputs).index_select(0, self._inverse.to(q.device))


def reference_attention(rows: PackedRows) -> ReferenceAttention:
    """The single-process PackedAttention over ``rows`` (see ReferenceAttention)."""
    return ReferenceAttention(rows)


class PlannedAttention:
    """Distributed packed attention: ``fulcrum.torch.attention`` over ``step`` on ``group`` (None: the default
    group). Every rank of the group calls it with the same StepPlan, its rows ``PackedRows.from_step(step,
    rank)``; ``backend`` is fulcrum.torch.attention's."""

    def __init__(self, step: StepPlan, group: dist.ProcessGroup | None = None, *,
                 backend: BackendChoice = "auto") -> None:
        self.step, self.group, self.backend = step, group, backend

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, scale: float) -> torch.Tensor:
        o = attention(q, k, v, self.step, self.group, backend=self.backend, softmax_scale=scale)
        assert isinstance(o, torch.Tensor)  # without return_lse, attention returns o alone
        return o


def planned_attention(step: StepPlan, group: dist.ProcessGroup | None = None, *,
                      backend: BackendChoice = "auto") -> PlannedAttention:
    """The distributed PackedAttention of a StepPlan (see PlannedAttention)."""
    return PlannedAttention(step, group, backend=backend)
