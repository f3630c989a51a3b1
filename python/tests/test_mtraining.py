"""MTraining from Python: the striped ring planners, their ring-step Programs and MTraining's balance metrics,
on masks from the online estimator over NumPy arrays of synthetic attention."""
import numpy as np
import pytest

import fulcrum


def dynamic_document(length: int, gamma: float = 0.9) -> fulcrum.Document:
    """One document whose q heads carry the vsblocks masks the estimator finds on its synthetic data."""
    q, k, _, _ = fulcrum.synthetic_attention(3, 2, 1, 64, length)
    index = fulcrum.estimate_vertical_slash(q[-64:], np.arange(length - 64, length), k, np.arange(length),
                                            gamma=gamma, block=64)
    doc = fulcrum.Document(0, length)
    doc.head_masks = [fulcrum.Mask.vertical_slash_blocks(i.block, i.verticals, i.block_offsets) for i in index]
    return doc


def model() -> fulcrum.ModelShape:
    m = fulcrum.model_shape("tiny")
    m.q_heads, m.kv_heads, m.head_dim = 2, 1, 64
    return m


def test_step_balance_by_hand():
    b = fulcrum.step_balance([[4, 0], [2, 2]])
    assert b["worker"] == pytest.approx(1.0)
    assert b["step_mean"] == pytest.approx(1.5)
    assert b["step_sync"] == pytest.approx(6 / 4)


def test_block_striping_balances_a_dynamic_pattern_over_ranks_and_steps():
    batch = fulcrum.pack_batch([dynamic_document(8192)], 4, 2048)
    sync = {}
    for name in ("ring", "zigzag", "mtraining"):
        assignment = fulcrum.make_planner(name, fulcrum.PlannerOptions(model())).plan(batch)
        assert fulcrum.verify(assignment).ok
        plan = fulcrum.compile_plan(assignment, model(), "forward", "single-stream")
        assert fulcrum.verify_plan(plan, assignment.batch).ok
        steps = fulcrum.plan_steps(plan)
        assert len(steps["flops"]) == 4 and all(len(row) == 4 for row in steps["flops"])  # 4 ranks x 4 ring steps
        sync[name] = fulcrum.step_balance(steps["flops"])["step_sync"]
    assert sync["mtraining"] < sync["zigzag"] < sync["ring"]


def test_striped_planners_name_the_stripe_when_a_document_is_not_whole_stripes():
    batch = fulcrum.pack_batch([fulcrum.Document(0, 4 * 100)], 4, 100)
    with pytest.raises(fulcrum.InputError, match="mtraining-block"):
        fulcrum.make_planner("mtraining", fulcrum.PlannerOptions(model())).plan(batch)
    assert fulcrum.make_planner("mtraining", fulcrum.PlannerOptions(model())).document_length_multiple(4) == 256
