import pytest

import fulcrum

# Also run against the installed wheel (scripts/test_python_package.sh, CI's python-package step).
pytestmark = pytest.mark.package


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


def test_simulate_plan_runs_only_verified_plans(model, assignment):
    """A plan from bytes is checked before it runs: every corrupted byte that verify_plan rejects raises
    InputError from simulate_plan (it segfaulted, or raised IndexError, MemoryError or UnicodeDecodeError)."""
    plan = fulcrum.compile_plan(assignment, model, mode="single-stream")
    hardware = fulcrum.hardware("h200-dgx")
    data = plan.to_bytes()
    rejected = 0
    # Every 23rd byte (a bit of each in turn): the binding's part. SimEngine.EveryCorruptPlanThatVerifiesSimulates
    # flips every byte in C++; every 5th here took 22 s.
    for at in range(8, len(data), 23):
        corrupt = bytearray(data)
        corrupt[at] ^= 1 << (at % 8)
        try:
            decoded = fulcrum.Plan.from_bytes(bytes(corrupt))
        except fulcrum.InputError:
            continue
        if fulcrum.verify_plan(decoded).ok:
            assert fulcrum.simulate_plan(decoded, hardware).makespan_s > 0
            continue
        rejected += 1
        fresh = fulcrum.Plan.from_bytes(bytes(corrupt))  # not yet verified: simulate_plan checks it itself
        with pytest.raises(fulcrum.InputError, match="fails verify_plan, so it is not run"):
            fulcrum.simulate_plan(fresh, hardware)
    assert rejected > 0
    # A compiled plan, and one read back from its bytes, simulate alike.
    assert (fulcrum.simulate_plan(fulcrum.Plan.from_bytes(data), hardware).makespan_s ==
            fulcrum.simulate_plan(plan, hardware).makespan_s)


def test_plan_names_that_are_not_utf8_are_refused(model, assignment):
    data = bytearray(fulcrum.compile_plan(assignment, model).to_bytes())
    at = data.find(b"distca")
    data[at + 1] = 0xFF
    with pytest.raises(fulcrum.InputError, match=r"plan\.planner at byte .*not UTF-8"):
        fulcrum.Plan.from_bytes(bytes(data))


def test_plan_from_dict_refuses_what_is_not_json():
    with pytest.raises(fulcrum.InputError, match="not JSON data"):
        fulcrum.Plan.from_dict({"format": float("nan")})
    with pytest.raises(fulcrum.InputError, match="not JSON data"):
        fulcrum.Plan.from_dict({"format": object()})
