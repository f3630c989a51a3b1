"""A compiled Plan's per-rank Programs as Python objects: what fulcrum.torch's executor interprets.

A Plan crosses into Python as its JSON schema (``Plan.to_dict()``, plan/serialize_json.cpp); ``parse_plan``
turns it, once per Plan, into frozen objects that mirror the C++ IR (plan/program.hpp) one to one: plain
data whose identity lasts as long as the plan (kernel backends key their caches on it) and whose fields
cost a Python attribute read in the executor's loops, which objects bound from C++ would not give.

A launch's messages are grouped as it posts them: per peer, its receives as one **transfer** and its sends
as another, packed back to back in the plan's order. That order is the plan's **posting order**
(plan/program.hpp, CommLaunch), which compile produces and verify_plan checks: both sides of every rank
pair post the same messages in the same order, as NCCL, which matches by posting order, needs. Only plans
that pass verify_plan are parsed.

Nothing here imports torch.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import _core

RowSpan = tuple[int, int, int]  # (buffer row, position in the document, count), as in the IR

# Element bytes of each buffer field: activations are stored in the plan's dtype, LSE and gradients fp32.
STORED_FIELDS = frozenset({"q", "k", "v", "o", "d_o"})
KV_FIELDS = frozenset({"k", "v", "dk", "dv"})


@dataclass(frozen=True)
class Slice:
    """Rows [row, row + rows) of buffer ``buffer`` (an index into the program's buffers), and of each row
    the buffer field's own heads [heads[0], heads[1]) (kv heads for K/V-side fields; None: every head)."""

    buffer: int
    row: int
    rows: int
    heads: tuple[int, int] | None = None


@dataclass(frozen=True)
class Buffer:
    name: str
    field: str  # q, k, v, o, lse, d_o, dq, dk, dv
    rows: int
    init: str  # input (the caller's tensor), zero, -inf, undefined
    output: bool  # the caller reads it after the pass


@dataclass(frozen=True)
class HeadRun:
    """Consecutive q heads [begin, end) of an item that share one mask."""

    begin: int
    end: int
    mask: _core.Mask


@dataclass(frozen=True)
class Document:
    length: int
    mask: _core.Mask
    head_masks: tuple[_core.Mask, ...]  # empty: ``mask`` on every q head; else one per q head

    def runs(self, begin: int, end: int) -> tuple[HeadRun, ...]:
        """Heads [begin, end) as runs of consecutive heads sharing a mask (one run without head masks)."""
        if not self.head_masks:
            return (HeadRun(begin, end, self.mask),)
        runs: list[HeadRun] = []
        for head in range(begin, end):
            mask = self.head_masks[head]
            if runs and str(runs[-1].mask) == str(mask):
                runs[-1] = HeadRun(runs[-1].begin, head + 1, mask)
            else:
                runs.append(HeadRun(head, head + 1, mask))
        return tuple(runs)


@dataclass(frozen=True)
class Item:
    """One CA-task of a fused call: query spans of document ``doc`` against one key span, q heads
    ``heads`` ((begin, end), or None for all). Spans with no rows are dropped."""

    doc: int
    queries: tuple[RowSpan, ...]
    keys: RowSpan
    heads: tuple[int, int] | None


@dataclass(frozen=True)
class Transfer:
    """One posting of a launch (plan/program.hpp, CommLaunch): its sends to ``peer`` (``send``), or its receives
    from it, as ``slices`` packed back to back in the plan's order. ``tag`` is the first message's (gloo matches
    by it; NCCL by posting order)."""

    send: bool
    peer: int
    tag: int
    slices: tuple[Slice, ...]


@dataclass(frozen=True)
class Launch:
    id: int
    kind: str  # dispatch | return
    transfers: tuple[Transfer, ...]  # what to post: per peer its receives, then per peer its sends


@dataclass(frozen=True)
class Wait:
    launch: int


@dataclass(frozen=True)
class Attention:
    q: int
    k: int
    v: int
    o: int
    lse: int
    items: tuple[Item, ...]


@dataclass(frozen=True)
class AttentionBackward:
    q: int
    k: int
    v: int
    o: int
    lse: int
    d_o: int
    dq: int
    dk: int
    dv: int
    items: tuple[Item, ...]


@dataclass(frozen=True)
class Reduce:
    """merge: out/out_lse = the LSE-weighted merge of parts/part_lse; sum: out += the sum of parts."""

    op: str  # merge | sum
    out: Slice
    out_lse: Slice
    parts: tuple[Slice, ...]
    part_lse: tuple[Slice, ...]


@dataclass(frozen=True)
class Copy:
    src: Slice
    dst: Slice


Instruction = Launch | Wait | Attention | AttentionBackward | Reduce | Copy


@dataclass(frozen=True)
class OwnedRows:
    """Rows [row, row + end - begin) of a rank's input and output tensors hold tokens [begin, end) of
    document ``doc`` (an index into the plan's documents)."""

    doc: int
    begin: int
    end: int
    row: int


@dataclass(frozen=True)
class RankProgram:
    rank: int
    owned: tuple[OwnedRows, ...]
    buffers: tuple[Buffer, ...]
    instructions: tuple[Instruction, ...]
    written: frozenset[int]  # buffers some instruction writes (an input among them must be copied first)

    @property
    def owned_rows(self) -> int:
        return sum(o.end - o.begin for o in self.owned)

    def buffer(self, name: str) -> int:
        for index, b in enumerate(self.buffers):
            if b.name == name:
                return index
        raise _core.Error(f"rank {self.rank}: the program has no buffer '{name}'")


@dataclass(frozen=True)
class ParsedPlan:
    pass_: str  # forward | backward
    planner: str
    mode: str
    q_heads: int
    kv_heads: int
    head_dim: int
    dtype_bytes: int
    documents: tuple[Document, ...]
    programs: tuple[RankProgram, ...]
    # Per-plan memo for kernel backends (their lowered task lists, call layouts, device index tensors), keyed by
    # (backend name, id() of an instruction, item or call of this plan[, device]): it lives and dies with the plan.
    kernel_cache: dict[tuple[Any, ...], Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def ranks(self) -> int:
        return len(self.programs)

    def heads_of(self, buffer_field: str) -> int:
        return self.kv_heads if buffer_field in KV_FIELDS else self.q_heads

    def row_bytes(self, buffer_field: str) -> int:
        """Bytes of one row of a buffer of ``buffer_field`` (HeadLayout::row_bytes)."""
        values = self.q_heads if buffer_field == "lse" else self.heads_of(buffer_field) * self.head_dim
        return values * (self.dtype_bytes if buffer_field in STORED_FIELDS else 4)


# ---- Reading the JSON schema ----


def _slice(data: Sequence[int]) -> Slice:
    """[buffer, row, rows], or [buffer, row, rows, head begin, head end] for a head range."""
    heads = (int(data[3]), int(data[4])) if len(data) == 5 else None
    return Slice(int(data[0]), int(data[1]), int(data[2]), heads)


def _span(data: Sequence[int]) -> RowSpan:
    return (int(data[0]), int(data[1]), int(data[2]))


def _item(data: dict[str, Any]) -> Item:
    queries = tuple(s for s in (_span(q) for q in data["queries"]) if s[2] > 0)
    heads = data.get("heads")
    return Item(int(data["doc"]), queries, _span(data["keys"]), (int(heads[0]), int(heads[1])) if heads else None)


def _transfers(data: dict[str, Any]) -> tuple[Transfer, ...]:
    """A launch's postings: per peer (in rank order) its receives, then per peer its sends, each packing the
    peer's messages in the plan's list order, which is the posting order."""
    out: list[Transfer] = []
    for send, key in ((False, "receives"), (True, "sends")):
        by_peer: dict[int, list[dict[str, Any]]] = {}
        for m in data[key]:
            by_peer.setdefault(int(m["peer"]), []).append(m)
        for peer, messages in sorted(by_peer.items()):
            out.append(Transfer(send, peer, int(messages[0]["tag"]), tuple(_slice(m["slice"]) for m in messages)))
    return tuple(out)


def _instruction(data: dict[str, Any]) -> Instruction:
    op = data["op"]
    if op == "launch":
        return Launch(int(data["id"]), data["kind"], _transfers(data))
    if op == "wait":
        return Wait(int(data["launch"]))
    if op == "attention":
        return Attention(q=int(data["q"]), k=int(data["k"]), v=int(data["v"]), o=int(data["o"]),
                         lse=int(data["lse"]), items=tuple(_item(i) for i in data["items"]))
    if op == "attention-backward":
        return AttentionBackward(q=int(data["q"]), k=int(data["k"]), v=int(data["v"]), o=int(data["o"]),
                                 lse=int(data["lse"]), d_o=int(data["d_o"]), dq=int(data["dq"]), dk=int(data["dk"]),
                                 dv=int(data["dv"]), items=tuple(_item(i) for i in data["items"]))
    if op in ("merge", "sum"):
        return Reduce(op, _slice(data["out"]), _slice(data["out_lse"]), tuple(_slice(s) for s in data["parts"]),
                      tuple(_slice(s) for s in data["part_lse"]))
    if op == "copy":
        return Copy(_slice(data["src"]), _slice(data["dst"]))
    raise _core.Error(f"plan: instruction op '{op}' is not one this executor knows")


def _written(instructions: Sequence[Instruction]) -> frozenset[int]:
    out: set[int] = set()
    for i in instructions:
        if isinstance(i, Launch):
            out.update(s.buffer for t in i.transfers if not t.send for s in t.slices)
        elif isinstance(i, Attention):
            out.update((i.o, i.lse))
        elif isinstance(i, AttentionBackward):
            out.update((i.dq, i.dk, i.dv))
        elif isinstance(i, Reduce):
            out.update((i.out.buffer, i.out_lse.buffer) if i.op == "merge" else (i.out.buffer,))
        elif isinstance(i, Copy):
            out.add(i.dst.buffer)
    return frozenset(out)


def _program(data: dict[str, Any]) -> RankProgram:
    owned = tuple(OwnedRows(int(o["doc"]), int(o["tokens"][0]), int(o["tokens"][1]), int(o["row"]))
                  for o in data["owned"])
    buffers = tuple(Buffer(b["name"], b["field"], int(b["rows"]), b["init"], bool(b["output"]))
                    for b in data["buffers"])
    instructions = tuple(_instruction(i) for i in data["instructions"])
    return RankProgram(int(data["rank"]), owned, buffers, instructions, _written(instructions))


def require_verified(plan: _core.Plan) -> None:
    """Passes only plans that pass verify_plan: those from bytes or dicts are checked here (compile_plan's carry
    the mark verify_plan sets, since verifying costs far more than compiling)."""
    if getattr(plan, "_verified", False):
        return
    report = _core.verify_plan(plan)
    if not report.ok:
        raise _core.InputError(f"{plan.pass_} plan: fails verify_plan, so it is not run: {report.summary()}")


def parse_plan(plan: _core.Plan) -> ParsedPlan:
    """Every rank's Program of ``plan`` as Python objects. InputError when the plan fails verify_plan."""
    require_verified(plan)
    data = plan.to_dict()
    heads = data["heads"]
    documents = tuple(
        Document(int(d["length"]), _core.Mask(d["mask"]), tuple(_core.Mask(m) for m in d.get("head_masks", ())))
        for d in data["documents"])
    return ParsedPlan(
        pass_=data["pass"], planner=data["planner"], mode=data["mode"], q_heads=int(heads["q_heads"]),
        kv_heads=int(heads["kv_heads"]), head_dim=int(heads["head_dim"]), dtype_bytes=int(heads["dtype_bytes"]),
        documents=documents, programs=tuple(_program(p) for p in data["programs"]))


def item_runs(plan: ParsedPlan, item: Item) -> tuple[HeadRun, ...]:
    """The item's q heads as runs sharing one mask."""
    begin, end = item.heads if item.heads is not None else (0, plan.q_heads)
    return plan.documents[item.doc].runs(begin, end)
