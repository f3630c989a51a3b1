import pytest

import fulcrum


@pytest.mark.parametrize("pass_", ["forward", "backward"])
@pytest.mark.parametrize("mode", ["pingpong", "single-stream", "signal"])
def test_compiled_plans_verify_and_round_trip(model, assignment, pass_, mode):
    plan = fulcrum.compile_plan(assignment, model, pass_=pass_, mode=mode, dtype_bytes=2)
    assert (plan.pass_, plan.mode, plan.planner, plan.ranks) == (pass_, mode, "distca", 4)
    assert plan.nano_batches == (1 if mode == "single-stream" else 2)
    report = fulcrum.verify_plan(plan, assignment.batch)
    assert report.ok, report.summary()
    data = plan.to_dict()
    assert len(data["programs"]) == plan.ranks
    assert fulcrum.Plan.from_dict(data) == plan
    assert fulcrum.Plan.from_bytes(plan.to_bytes()) == plan


def test_verify_reports_a_broken_plan(model, assignment):
    data = fulcrum.compile_plan(assignment, model).to_dict()
    # Drop one rank's instructions: its messages no longer match and its outputs are never written.
    data["programs"][1]["instructions"] = []
    report = fulcrum.verify_plan(fulcrum.Plan.from_dict(data), assignment.batch)
    assert not report.ok and report.errors


def test_compile_errors_name_the_field(model, assignment):
    with pytest.raises(fulcrum.InputError, match="mode = 'zigzag'"):
        fulcrum.compile_plan(assignment, model, mode="zigzag")
    with pytest.raises(fulcrum.InputError, match="pass"):
        fulcrum.compile_plan(assignment, model, pass_="sideways")
    with pytest.raises(fulcrum.Error):
        fulcrum.Plan.from_dict({"pass": "forward"})
