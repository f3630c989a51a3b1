"""check_same_step: ranks holding different plans are named on every rank, before any attention traffic."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="fulcrum.torch needs PyTorch (pip install .[torch])")
import fulcrum.torch as ft  # noqa: E402
from gloo_group import run_on_gloo  # noqa: E402

import fulcrum  # noqa: E402


def step_for(ranks: int, seed: int) -> ft.StepPlan:
    stream = fulcrum.BatchStream(fulcrum.make_length_source("uniform:16:400", seed=seed), ranks, 512)
    model = fulcrum.model_shape("tiny")
    assignment = fulcrum.make_planner("distca", fulcrum.PlannerOptions(model, granularity=16)).plan(stream.next())
    return ft.compile_step(assignment, model)


def agree(rank: int, world: int) -> list[str]:
    """check_same_step's verdict with every rank on seed 1, then with the last rank on seed 2."""
    verdicts = []
    for odd_rank in (-1, world - 1):
        try:
            ft.check_same_step(step_for(world, seed=2 if rank == odd_rank else 1))
            verdicts.append("agree")
        except fulcrum.Error as error:
            verdicts.append(str(error))
    return verdicts


def test_digest_is_a_function_of_the_plan():
    assert ft.step_digest(step_for(2, 1)) == ft.step_digest(step_for(2, 1))
    assert ft.step_digest(step_for(2, 1)) != ft.step_digest(step_for(2, 2))


def test_every_rank_names_the_ranks_with_another_plan():
    world = 3
    verdicts = run_on_gloo(agree, world)
    assert [same for same, _ in verdicts] == ["agree"] * world
    assert all(f"ranks [{world - 1}] hold a different plan from rank 0's" in v for _, v in verdicts), verdicts
