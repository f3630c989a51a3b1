import threading
import time

import pytest
from conftest import HEAVY_RANKS, HEAVY_TOKENS, heavy_lengths, heavy_options

import fulcrum


def test_batches_arrive_in_order_verified_with_unique_ids():
    lengths = [[300, 500, 224], [1024], [100] * 10]
    with fulcrum.PlanAheadLoader(lengths, "distca", ranks=2, tokens_per_rank=512, depth=2, verify=True) as loader:
        planned = list(loader)
    assert [p.index for p in planned] == [0, 1, 2]
    ids = [d.id for p in planned for d in p.batch.documents]
    assert len(ids) == len(set(ids)) == 3 + 1 + 10
    for p in planned:
        assert p.assignment.planner == "distca" and fulcrum.verify(p.assignment).ok and p.plan_s >= 0


def test_auto_plans_each_batch_with_the_candidate_that_simulates_fastest():
    lengths = [[300, 500, 224], [1024], [100] * 10]
    with fulcrum.PlanAheadLoader(lengths, "auto", ranks=2, tokens_per_rank=512, verify=True) as loader:
        planned = list(loader)
    assert all(p.assignment.planner in fulcrum.planner_names() for p in planned)
    # An AutoPlanner of one's own: other hardware and candidates, and the choice of every batch.
    model = fulcrum.model_shape("llama3-8b")
    auto = fulcrum.AutoPlanner(fulcrum.PlannerOptions(model), "a100-p4de", candidates=["distca", "packed"])
    with fulcrum.PlanAheadLoader(lengths, auto, ranks=2, tokens_per_rank=512, verify=True) as loader:
        planned = list(loader)
    assert [c["chosen"] for c in auto.choices] == [p.assignment.planner for p in planned]
    assert all(c["chosen_s"] <= c["runner_up_s"] for c in auto.choices)
    with pytest.raises(fulcrum.InputError, match="candidates: wlb"):
        fulcrum.AutoPlanner(fulcrum.PlannerOptions(model), candidates=["wlb"])


def test_head_tail_packing_reaches_the_planner():
    lengths = [[300, 500, 224], [700, 324]]
    with fulcrum.PlanAheadLoader(lengths, "distca", ranks=2, tokens_per_rank=512, boundary_split="head-tail",
                                 verify=True) as loader:
        planned = list(loader)
    # The 500-token document crosses the ranks (212 tokens on rank 0, 288 on rank 1): each holds a head
    # piece (a multiple of 64 tokens) and a tail piece.
    first = [(s.doc, s.tokens, s.rank) for s in planned[0].batch.segments if s.doc == 1]
    assert first == [(1, (0, 64), 0), (1, (64, 192), 1), (1, (192, 352), 1), (1, (352, 500), 0)]
    assert all(fulcrum.verify(p.assignment).ok for p in planned)
    # A bad layout is refused when the loader is made, not by its worker at the first batch.
    with pytest.raises(fulcrum.InputError, match=r"^boundary_split = 'zigzag'"):
        fulcrum.PlanAheadLoader(lengths, "distca", ranks=2, tokens_per_rank=512, boundary_split="zigzag")


def test_depth_bounds_how_far_planning_runs_ahead():
    pulled = []

    def lengths():
        for i in range(10):
            pulled.append(i)
            yield [64, 64]

    loader = fulcrum.PlanAheadLoader(lengths(), "packed", ranks=1, tokens_per_rank=128, depth=3,
                                     options=fulcrum.PlannerOptions(fulcrum.model_shape("tiny"), granularity=64))
    it = iter(loader)
    next(it)
    time.sleep(0.3)  # ample time for the worker to run as far ahead as it is allowed
    # Batch 0 is out (training); batches 1..3 are planned; batch 4 has been read but waits for a slot.
    assert len(pulled) <= 5
    assert len(list(it)) == 9
    loader.close()


def test_planning_errors_surface_at_their_batch():
    loader = fulcrum.PlanAheadLoader([[128], [0], [128]], "packed", ranks=1, tokens_per_rank=128)
    it = iter(loader)
    assert next(it).index == 0
    with pytest.raises(fulcrum.InputError, match="length"):
        next(it)
    loader.close()
    with pytest.raises(fulcrum.InputError, match="depth = 0"):
        fulcrum.PlanAheadLoader([], "packed", ranks=1, tokens_per_rank=128, depth=0)
    # A length that is not a whole number is named, not a bare ValueError (nor truncated, for 1.5).
    for bad in ("a", 1.5):
        with fulcrum.PlanAheadLoader([[64, bad]], "packed", ranks=1, tokens_per_rank=128) as loader:
            with pytest.raises(fulcrum.InputError, match=rf"^lengths\[0\]\[1\] = {bad!r}: must be a whole number"):
                next(iter(loader))


def test_lengths_that_do_not_fit_are_an_error_not_a_drop():
    with fulcrum.PlanAheadLoader([[128], [100, 100]], "packed", ranks=1, tokens_per_rank=128) as loader:
        it = iter(loader)
        assert next(it).batch.total_tokens() == 128
        with pytest.raises(fulcrum.InputError, match=r"lengths\[1\]: .*document 2 would be cut at token 28"):
            next(it)


def test_batches_laid_out_by_the_caller_are_planned_as_they_are():
    laid_out = fulcrum.Batch.from_cu_seqlens([[0, 100, 128], [0, 64]], first_id=7)
    with fulcrum.PlanAheadLoader([laid_out], "distca", ranks=2, tokens_per_rank=128, verify=True) as loader:
        (planned,) = list(loader)
    assert planned.batch.segments[2].rank == 1 and planned.batch.documents[2].id == 9
    assert fulcrum.verify(planned.assignment, laid_out).ok
    with fulcrum.PlanAheadLoader([laid_out], "distca", ranks=4, tokens_per_rank=128) as loader:
        with pytest.raises(fulcrum.InputError, match="a Batch of 2 ranks, but the loader plans for ranks = 4"):
            list(loader)


def test_close_stops_an_endless_stream():
    def endless():
        while True:
            yield [128]

    with fulcrum.PlanAheadLoader(endless(), "packed", ranks=1, tokens_per_rank=128) as loader:
        assert next(iter(loader)).index == 0
    assert not loader._worker.is_alive()


@pytest.mark.timing
def test_planning_is_hidden_behind_the_training_step():
    # Each step sleeps as long as an average plan takes. Planned in line, a batch would cost plan + step;
    # planned ahead, about max(plan, step) once the first plan is in. The bound sits between the two,
    # computed from the plan times measured in this very run, so a loaded machine shifts both sides.
    batches = [heavy_lengths(seed) for seed in range(8)]
    probe = fulcrum.make_planner("distca", heavy_options())
    start = time.perf_counter()
    probe.plan(fulcrum.pack_batch(fulcrum.documents(batches[0]), HEAVY_RANKS, HEAVY_TOKENS))
    step_s = max(time.perf_counter() - start, 0.05)

    start = time.perf_counter()
    plan_s = []
    with fulcrum.PlanAheadLoader(batches, "distca", ranks=HEAVY_RANKS, tokens_per_rank=HEAVY_TOKENS,
                                 options=heavy_options(), depth=2) as loader:
        for planned in loader:
            plan_s.append(planned.plan_s)
            time.sleep(step_s)  # the simulated training step
    total = time.perf_counter() - start
    serial = sum(plan_s) + step_s * len(batches)
    overlapped = max(sum(plan_s), step_s * len(batches)) + plan_s[0]
    assert len(plan_s) == len(batches)
    # Overlapped is ~(n+1)/2n of serial (0.56 for 8 batches); not overlapping would give ~1.0.
    assert total < 0.8 * serial, f"total {total:.2f} s, serial {serial:.2f} s, overlapped {overlapped:.2f} s"


def test_prepare_runs_on_the_worker_and_arrives_with_the_batch():
    seen_threads = []

    def prepare(assignment):
        seen_threads.append(threading.current_thread().name)
        return len(assignment.tasks)

    with fulcrum.PlanAheadLoader([[128], [64, 64]], "packed", ranks=1, tokens_per_rank=128, prepare=prepare) as loader:
        planned = list(loader)
    assert [p.prepared for p in planned] == [len(p.assignment.tasks) for p in planned]
    assert seen_threads == ["fulcrum-plan-ahead"] * 2
