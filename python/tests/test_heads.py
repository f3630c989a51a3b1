"""fulcrum.assign_heads: FlexAttn's head solvers from Python, on a scenario and on a pattern report."""
import json
from pathlib import Path

import pytest

import fulcrum

EXAMPLE = Path(__file__).parents[2] / "data" / "heads" / "llama3-8b-262k-minference.json"


def test_solvers_and_scenarios_are_listed() -> None:
    assert fulcrum.head_solvers() == ["uniform", "random", "random-uniform", "greedy", "sa", "ga", "lpt-ls"]
    assert fulcrum.head_scenarios() == [f"S{i}" for i in range(1, 11)]


def test_scenario_assignment_is_valid_and_ours_beats_uniform() -> None:
    ours = fulcrum.assign_heads(scenario="S1")
    uniform = fulcrum.assign_heads(scenario="S1", solver="uniform")
    assert ours["devices"] == 2 and len(ours["assignment"]) == 16
    assert set(ours["assignment"]) <= {0, 1}
    assert uniform["assignment"] == [0] * 8 + [1] * 8  # Megatron's contiguous blocks
    assert ours["layer_s"] == pytest.approx(max(ours["device_s"]), rel=1e-12)
    assert ours["lower_bound_s"] <= ours["layer_s"] < uniform["layer_s"]
    assert ours["proven_optimal"] and ours["gap"] == pytest.approx(0, abs=1e-9)  # 4 F + 4 A per device
    # Same seed, same assignment.
    first = fulcrum.assign_heads(scenario="S7", solver="ga", seed=3)
    assert fulcrum.assign_heads(scenario="S7", solver="ga", seed=3)["assignment"] == first["assignment"]


def test_pattern_report_as_path_or_dict() -> None:
    from_path = fulcrum.assign_heads(str(EXAMPLE), devices=4, layer=3, prompt_tokens=65536)
    report = json.loads(EXAMPLE.read_text())
    from_dict = fulcrum.assign_heads(report, devices=4, layer=3, prompt_tokens=65536)
    assert from_path["assignment"] == from_dict["assignment"]
    assert len(from_path["assignment"]) == 32 and set(from_path["assignment"]) == {0, 1, 2, 3}


def test_bad_input_names_the_field() -> None:
    with pytest.raises(fulcrum.InputError, match="devices = 17"):
        fulcrum.assign_heads(scenario="S1", devices=17)
    with pytest.raises(fulcrum.InputError, match="solver = 'magic'"):
        fulcrum.assign_heads(scenario="S1", solver="magic")
    report = json.loads(EXAMPLE.read_text())
    report["layers"][0]["heads"][2] = {"kind": "a-shape", "sink": -1, "window": 8}
    with pytest.raises(fulcrum.InputError, match=r"patterns.layers\[0\].heads\[2\].sink"):
        fulcrum.assign_heads(report, devices=4)
    with pytest.raises(fulcrum.InputError, match="layer = 40"):
        fulcrum.assign_heads(str(EXAMPLE), devices=4, layer=40)
