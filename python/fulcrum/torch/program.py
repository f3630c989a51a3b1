"""A compiled Plan's per-rank Programs as Python objects: what fulcrum.torch's executor interprets.

A Plan crosses into Python as its JSON schema (``Plan.to_dict()``, plan/serialize_json.cpp); ``parse_plan``
turns it, once per Plan, into frozen objects that mirror the C++ IR (plan/program.hpp) one to one, plus
one thing the C++ executor does not need: the **wire order** of every launch. MPI and gloo match a
message by (peer, tag), but NCCL matches a peer's sends and receives by the order they are posted, so
both sides of every rank pair must post their messages in one order that both derive from the Plan.
Messages that one launch sends to one peer and that the peer receives in one launch are also packed into
one transfer (one message per peer and launch pair instead of one per slice).

Nothing here imports torch: it is plain data, checked against the plan's own invariants.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
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
class Message:
    peer: int
    tag: int
    slice: Slice


@dataclass(frozen=True)
class Transfer:
    """What one launch posts for one (peer, launch pair): one send, or one receive, of ``slices`` packed
    back to back in this order. ``tag`` is the first message's (gloo matches by it; NCCL by order)."""

    send: bool
    peer: int
    tag: int
    slices: tuple[Slice, ...]


@dataclass(frozen=True)
class Launch:
    id: int
    kind: str  # dispatch | return
    sends: tuple[Message, ...]
    receives: tuple[Message, ...]
    transfers: tuple[Transfer, ...] = ()  # the wire order: what to post, in order (parse_plan fills it)


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


def _messages(data: Iterable[dict[str, Any]]) -> tuple[Message, ...]:
    return tuple(Message(int(m["peer"]), int(m["tag"]), _slice(m["slice"])) for m in data)


def _instruction(data: dict[str, Any]) -> Instruction:
    op = data["op"]
    if op == "launch":
        return Launch(int(data["id"]), data["kind"], _messages(data["sends"]), _messages(data["receives"]))
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
            out.update(m.slice.buffer for m in i.receives)
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


# ---- Wire order ----


def _wire_order(plan: ParsedPlan) -> ParsedPlan:
    """Fills every Launch's transfers. A rank pair's messages are grouped by (sender launch, receiver
    launch) and each group is packed into one transfer, ordered by tag inside. Both sides post a pair's
    groups sorted by (sender launch, receiver launch): the sender in its program order, the receiver in
    its own, and the two orders agree unless a pair's messages cross (one launch earlier on the sender,
    later on the receiver), which no order could serve and which is refused here."""
    position: dict[tuple[int, int], int] = {}  # (rank, launch id) -> its place among the rank's launches
    sends: dict[tuple[int, int, int], tuple[int, Slice]] = {}  # (src, dst, tag) -> (src launch, slice)
    receives: dict[tuple[int, int, int], tuple[int, Slice]] = {}
    for p in plan.programs:
        launches = [i for i in p.instructions if isinstance(i, Launch)]
        for index, i in enumerate(launches):
            position[p.rank, i.id] = index
            for out, messages, sending in ((sends, i.sends, True), (receives, i.receives, False)):
                for m in messages:
                    if not 0 <= m.peer < plan.ranks or m.peer == p.rank:
                        raise _core.Error(f"plan: rank {p.rank} launch {i.id}: peer {m.peer} is not another rank")
                    key = (p.rank, m.peer, m.tag) if sending else (m.peer, p.rank, m.tag)
                    if key in out:
                        raise _core.Error(f"plan: two messages from rank {key[0]} to rank {key[1]} carry tag {key[2]}")
                    out[key] = (i.id, m.slice)
    if sends.keys() != receives.keys():
        src, dst, tag = sorted(sends.keys() ^ receives.keys())[0]
        raise _core.Error(f"plan: the message from rank {src} to rank {dst} with tag {tag} has only one side")

    groups: dict[tuple[int, int, int, int], list[tuple[int, Slice, Slice]]] = defaultdict(list)
    for (src, dst, tag), (send_launch, send_slice) in sends.items():
        recv_launch, recv_slice = receives[src, dst, tag]
        if plan.programs[src].buffers[send_slice.buffer].field != plan.programs[dst].buffers[recv_slice.buffer].field \
                or send_slice.rows != recv_slice.rows or _head_count(send_slice) != _head_count(recv_slice):
            raise _core.Error(f"plan: the message from rank {src} to rank {dst} with tag {tag} changes size or field")
        groups[src, dst, send_launch, recv_launch].append((tag, send_slice, recv_slice))

    by_pair: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    for src, dst, a, b in groups:
        by_pair[src, dst].append((position[src, a], position[dst, b]))
    for (src, dst), order in by_pair.items():
        if sorted(order) != sorted(order, key=lambda ab: (ab[1], ab[0])):
            raise _core.Error(f"plan: messages from rank {src} to rank {dst} cross launches (sent in one order, "
                              "received in another): no posting order can serve them over NCCL")

    posted: dict[tuple[int, int], list[tuple[tuple[int, int, int], Transfer]]] = defaultdict(list)
    for (src, dst, a, b), group in groups.items():
        group.sort(key=lambda m: m[0])
        tag = group[0][0]
        send = Transfer(True, dst, tag, tuple(m[1] for m in group))
        receive = Transfer(False, src, tag, tuple(m[2] for m in group))
        posted[src, a].append(((dst, position[dst, b], tag), send))
        posted[dst, b].append(((src, position[src, a], tag), receive))

    programs = []
    for p in plan.programs:
        instructions = tuple(
            replace(i, transfers=tuple(t for _, t in sorted(posted[p.rank, i.id], key=lambda e: (e[1].send, e[0]))))
            if isinstance(i, Launch) else i
            for i in p.instructions)
        programs.append(replace(p, instructions=instructions))
    return replace(plan, programs=tuple(programs))


def _head_count(s: Slice) -> int | None:
    return None if s.heads is None else s.heads[1] - s.heads[0]


def parse_plan(plan: _core.Plan) -> ParsedPlan:
    """Every rank's Program of ``plan`` as Python objects, with the wire order of every launch."""
    data = plan.to_dict()
    heads = data["heads"]
    documents = tuple(
        Document(int(d["length"]), _core.Mask(d["mask"]), tuple(_core.Mask(m) for m in d.get("head_masks", ())))
        for d in data["documents"])
    parsed = ParsedPlan(
        pass_=data["pass"], planner=data["planner"], mode=data["mode"], q_heads=int(heads["q_heads"]),
        kv_heads=int(heads["kv_heads"]), head_dim=int(heads["head_dim"]), dtype_bytes=int(heads["dtype_bytes"]),
        documents=documents, programs=tuple(_program(p) for p in data["programs"]))
    for rank, p in enumerate(parsed.programs):
        if p.rank != rank:
            raise _core.Error(f"plan: programs[{rank}] is rank {p.rank}'s")
    return _wire_order(parsed)


def item_runs(plan: ParsedPlan, item: Item) -> tuple[HeadRun, ...]:
    """The item's q heads as runs sharing one mask."""
    begin, end = item.heads if item.heads is not None else (0, plan.q_heads)
    return plan.documents[item.doc].runs(begin, end)
