"""The Plan as fulcrum.torch reads it: every planner's Programs parse, and what they post suits NCCL.

NCCL matches a rank pair's sends and receives by posting order, and runs one rank's launches in order
on one stream. The posting order is the plan's (plan/program.hpp, CommLaunch; verify_plan checks it); here
the transfers fulcrum.torch reads from it are checked to agree on both sides, and the Programs to finish
launch by launch, on every planner's forward and backward plans, symbolically.
"""
from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import replace

import pytest

pytest.importorskip("torch", reason="fulcrum.torch needs PyTorch (pip install .[torch])")

from conftest import whole_stripes
from fulcrum.torch.program import Launch, ParsedPlan, Transfer, Wait, parse_plan

import fulcrum

OPTIONS = {"distca": {"granularity": 16, "tolerance": 0.05}, "dcp": {"dcp_block": 32}, "wlb": {"cp_degree": 2}}


def model_shape() -> fulcrum.ModelShape:
    m = fulcrum.ModelShape()
    m.name, m.layers, m.hidden, m.ffn_hidden = "test-gqa", 1, 64, 256
    m.q_heads, m.kv_heads, m.head_dim, m.dtype_bytes = 4, 2, 16, 4
    return m


def plans(ranks: int):
    rng = random.Random(ranks)
    lengths = [rng.choice([rng.randint(5, 60), rng.randint(100, 380)]) for _ in range(40)]
    total, kept = ranks * 160, []
    for length in lengths:
        if sum(kept) < total:
            kept.append(min(length, total - sum(kept)))
    batch = fulcrum.pack_batch(fulcrum.documents(kept), ranks, 160)
    for planner in fulcrum.planner_names():
        made = fulcrum.make_planner(planner, fulcrum.PlannerOptions(model_shape(), **OPTIONS.get(planner, {})))
        assignment = made.plan(whole_stripes(made, batch))
        for mode in ("pingpong", "single-stream"):
            for pass_ in ("forward", "backward"):
                yield f"{planner}/{mode}/{pass_}", fulcrum.compile_plan(assignment, model_shape(), pass_, mode)


def posted(plan: ParsedPlan, sends: bool) -> dict[tuple[int, int], list[tuple[int, int]]]:
    """(sender, receiver) -> the (tag, bytes) of each transfer in the order the given side posts them."""
    out: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    for p in plan.programs:
        for i in p.instructions:
            if isinstance(i, Launch):
                for t in i.transfers:
                    if t.send == sends:
                        size = sum(s.rows * plan.row_bytes(p.buffers[s.buffer].field) for s in t.slices)
                        out[(p.rank, t.peer) if sends else (t.peer, p.rank)].append((t.tag, size))
    return out


def in_order_stall(plan: ParsedPlan) -> str | None:
    """Runs the Programs where each rank runs its launches one at a time in launch order (one NCCL stream):
    a transfer completes once both sides' launches are running, a launch once all its transfers have.
    Returns where the ranks are stuck, or None when every Program finishes."""
    pc = [0] * plan.ranks
    issued: list[list[Launch]] = [[] for _ in plan.programs]
    done = [0] * plan.ranks  # a rank's issued launches complete as a prefix
    finished: set[tuple[int, int, int]] = set()  # (sender, receiver, tag) of completed transfers

    def head(r: int) -> Launch | None:
        return issued[r][done[r]] if done[r] < len(issued[r]) else None

    def key(r: int, t: Transfer) -> tuple[int, int, int]:
        return (r, t.peer, t.tag) if t.send else (t.peer, r, t.tag)

    while True:
        progress = False
        for r, p in enumerate(plan.programs):
            while pc[r] < len(p.instructions):
                i = p.instructions[pc[r]]
                if isinstance(i, Wait) and not any(x.id == i.launch for x in issued[r][: done[r]]):
                    break
                if isinstance(i, Launch):
                    issued[r].append(i)
                pc[r] += 1
                progress = True
        running = {(key(r, t), t.send) for r in range(plan.ranks) if head(r) for t in head(r).transfers}
        for r in range(plan.ranks):  # both sides running: the transfer completes
            for t in head(r).transfers if head(r) else ():
                if (key(r, t), not t.send) in running and key(r, t) not in finished:
                    finished.add(key(r, t))
                    progress = True
        for r in range(plan.ranks):
            if head(r) is not None and all(key(r, t) in finished for t in head(r).transfers):
                done[r] += 1
                progress = True
        if all(pc[r] == len(p.instructions) for r, p in enumerate(plan.programs)):
            return None
        if not progress:
            return ", ".join(f"rank {r} at instruction {pc[r]}" for r in range(plan.ranks))


@pytest.mark.parametrize("ranks", [2, 4])
def test_both_sides_of_every_rank_pair_post_the_same_transfers_in_the_same_order(ranks):
    count = 0
    for name, compiled in plans(ranks):
        plan = parse_plan(compiled)
        sent, received = posted(plan, True), posted(plan, False)
        assert sent == received, name
        messages = sum(len(i["sends"]) for p in compiled.to_dict()["programs"] for i in p["instructions"]
                       if i["op"] == "launch")
        packed = sum(len(t.slices) for p in plan.programs for i in p.instructions if isinstance(i, Launch)
                     for t in i.transfers if t.send)
        assert packed == messages, name
        count += messages
    assert count > 0


@pytest.mark.parametrize("ranks", [2, 4])
def test_programs_finish_when_each_rank_completes_its_launches_in_order(ranks):
    for name, compiled in plans(ranks):
        assert in_order_stall(parse_plan(compiled)) is None, name


def test_in_order_stall_finds_launches_crossed_between_two_ranks():
    """The checker can fail: each rank first sends, then receives what the other sent first, and waits for
    the receive. Independent launches (gloo, MPI) finish; in launch order neither send can complete."""
    plan = parse_plan(next(plans(2))[1])

    def program(rank: int):
        first = Launch(0, "dispatch", (Transfer(True, 1 - rank, rank, ()),))
        second = Launch(1, "dispatch", (Transfer(False, 1 - rank, 1 - rank, ()),))
        return replace(plan.programs[rank], instructions=(first, second, Wait(1), Wait(0)))

    assert in_order_stall(replace(plan, programs=(program(0), program(1)))) is not None


def test_a_plan_whose_posting_order_is_wrong_fails_verify_plan_and_is_not_parsed():
    """Two sends to one peer swapped in one launch: tags still match (gloo would run it), but NCCL would pair
    each with the other's receive. verify_plan refuses it, and so does fulcrum.torch, for that reason only;
    swapping the peer's receives too is an order both sides agree on, which both accept."""
    data = next(plans(2))[1].to_dict()
    swapped = None
    for p in data["programs"]:
        for i in p["instructions"]:
            if i["op"] == "launch" and swapped is None:
                peers = [m["peer"] for m in i["sends"]]
                twice = [k for k, peer in enumerate(peers) if peers.index(peer) < k]
                if twice:
                    a, b = peers.index(peers[twice[0]]), twice[0]
                    i["sends"][a], i["sends"][b] = i["sends"][b], i["sends"][a]
                    swapped = (p["rank"], i["sends"][a]["peer"], {i["sends"][a]["tag"], i["sends"][b]["tag"]})
    assert swapped is not None
    src, dst, tags = swapped
    report = fulcrum.verify_plan(fulcrum.Plan.from_dict(data))
    assert not report.ok and len(report.errors) == 1
    assert report.errors[0].startswith(f"posting order {src} -> {dst}: rank {src}'s send posting #"), report.errors
    with pytest.raises(fulcrum.InputError, match=f"(?s)fails verify_plan, so it is not run: .*posting order {src} -> "):
        parse_plan(fulcrum.Plan.from_dict(data))

    for i in data["programs"][dst]["instructions"]:
        if i["op"] == "launch":
            at = [k for k, m in enumerate(i["receives"]) if m["peer"] == src and m["tag"] in tags]
            if len(at) == 2:
                i["receives"][at[0]], i["receives"][at[1]] = i["receives"][at[1]], i["receives"][at[0]]
    agreed = fulcrum.Plan.from_dict(data)
    assert fulcrum.verify_plan(agreed).ok
    parsed = parse_plan(agreed)
    assert posted(parsed, True) == posted(parsed, False)
