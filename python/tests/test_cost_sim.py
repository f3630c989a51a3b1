import json
from pathlib import Path

import jsonschema
import pytest

import fulcrum


def test_pair_counts_and_flops(model):
    n = 1000
    assert fulcrum.attention_pairs("causal", [(0, n)], (0, n), n) == n * (n + 1) // 2
    assert fulcrum.attention_pairs("full", [(0, 10), (90, 100)], (0, 100), 100) == 2000
    per_pair = fulcrum.attention_forward_flops_per_pair(model)
    assert per_pair == 4 * model.head_dim * model.q_heads
    causal = fulcrum.Mask("causal")
    assert fulcrum.attention_forward_flops(model, causal, [(0, n)], (0, n), n) == per_pair * n * (n + 1) // 2
    assert fulcrum.BACKWARD_FLOPS_FACTOR == 2.5
    assert fulcrum.linear_forward_flops_per_token(model) > 0 and fulcrum.activation_bytes_per_token(model) > 0
    with pytest.raises(fulcrum.InputError, match="range"):
        fulcrum.attention_pairs("causal", [(0, 1, 2)], (0, 1), 1)


def test_token_bytes_follow_gqa_and_dtype(model):
    b = fulcrum.token_bytes(model)
    assert b.q == model.q_heads * model.head_dim * model.dtype_bytes
    assert b.kv == 2 * model.kv_heads * model.head_dim * model.dtype_bytes
    assert b.output() == b.o + b.lse


def test_hardware_models():
    assert {"h200-dgx", "a100-p4de"} <= set(fulcrum.hardware_names())
    h200 = fulcrum.hardware("h200-dgx")
    assert h200.name == "h200-dgx" and h200.devices_per_node == 8 and h200.peak_flops > 1e14
    assert fulcrum.HardwareModel.from_dict(h200.to_dict()).to_dict() == h200.to_dict()
    assert h200.memory_bytes > 1e11 and h200.linear_s(1e12) > 0
    assert h200.attention_backward_s(4096, 4096, 2.5e12) > h200.attention_forward_s(4096, 4096, 1e12) > 0
    calibrated = fulcrum.hardware(str(Path(__file__).parents[2] / "data" / "hardware" / "cpu-local.json"))
    assert calibrated.peak_flops > 0 and calibrated.name != "h200-dgx"
    with pytest.raises(fulcrum.InputError, match="a100-p4de"):
        fulcrum.hardware("tpu-v9")


def test_simulate_plan_is_deterministic(model, assignment):
    hardware = fulcrum.hardware("h200-dgx")
    results = {}
    for mode in ["pingpong", "single-stream"]:
        plan = fulcrum.compile_plan(assignment, model, mode=mode, dtype_bytes=2)
        first, again = fulcrum.simulate_plan(plan, hardware), fulcrum.simulate_plan(plan, hardware)
        assert first.makespan_s == again.makespan_s > 0
        assert len(first.ranks) == plan.ranks
        assert 0 < max(r.total_s for r in first.ranks) <= first.makespan_s * (1 + 1e-9)
        assert sum(r.flops for r in first.ranks) > 0 and sum(r.bytes_sent for r in first.ranks) > 0
        assert sum(r.bytes_received for r in first.ranks) == pytest.approx(sum(r.bytes_sent for r in first.ranks))
        for r in first.ranks:
            assert min(r.attention_s, r.other_compute_s, r.comm_s, r.exposed_comm_s, r.peer_wait_s) >= 0
        results[mode] = first
    # Signal-only messages (1 byte) can only shorten the same plan.
    plan = fulcrum.compile_plan(assignment, model, mode="signal", dtype_bytes=2)
    assert fulcrum.simulate_plan(plan, hardware).makespan_s <= results["pingpong"].makespan_s


def test_simulate_training_matches_its_breakdown_and_orders_the_planners():
    llama, h200 = fulcrum.model_shape("llama3-8b"), fulcrum.hardware("h200-dgx")
    runs = {planner: fulcrum.simulate_training(planner, llama, h200, gpus=32, dataset="lognormal:9.5:1.5",
                                              max_doc_len=131072, tokens_per_rank=65536, iterations=2, seed=3)
            for planner in ("distca", "packed")}
    for r in runs.values():
        assert abs(sum(r["breakdown"].values()) - r["mean_iteration_s"]) <= 1e-9 * r["mean_iteration_s"]
        assert r["tp"] == 8 and r["dp"] == 4 and r["memory"]["out_of_memory"] is False
    # DistCA evens attention out where packing leaves it imbalanced, on the same documents.
    assert runs["distca"]["attention_imbalance"] < runs["packed"]["attention_imbalance"]
    assert runs["distca"]["tokens_per_s"] > runs["packed"]["tokens_per_s"]
    assert runs["distca"]["tokens_per_iteration"] == runs["packed"]["tokens_per_iteration"]
    with pytest.raises(fulcrum.InputError, match="tp = 3"):
        fulcrum.simulate_training("distca", llama, h200, tp=3)
    with pytest.raises(fulcrum.InputError, match="mode"):
        fulcrum.simulate_training("distca", llama, h200, mode="smoke")


def test_simulate_training_layer_schedule_overlaps_distca_layers():
    llama, h200 = fulcrum.model_shape("llama3-8b"), fulcrum.hardware("h200-dgx")
    common = dict(gpus=128, dataset="lognormal:9.5:1.5", max_doc_len=131072, tokens_per_rank=65536, iterations=2,
                  seed=3)
    whole = fulcrum.simulate_training("distca", llama, h200, **common)
    per_layer = fulcrum.simulate_training("distca", llama, h200, layer_schedule="per-layer", **common)
    assert whole["layer_schedule"] == "whole" and per_layer["layer_schedule"] == "per-layer"
    assert whole["breakdown"]["exposed_comm_s"] < per_layer["breakdown"]["exposed_comm_s"]
    assert whole["mean_iteration_s"] < per_layer["mean_iteration_s"]
    with pytest.raises(fulcrum.InputError, match="layer_schedule"):
        fulcrum.simulate_training("distca", llama, h200, layer_schedule="overlapped")


def test_simulate_training_memory_follows_the_recomputation_and_optimizer_policy():
    llama, h200 = fulcrum.model_shape("llama3-8b"), fulcrum.hardware("h200-dgx")
    common = dict(gpus=64, dataset="pretrain", max_doc_len=16384, tokens_per_rank=16384, iterations=1)
    kept = fulcrum.simulate_training("packed", llama, h200, **common)
    full = fulcrum.simulate_training("packed", llama, h200, recompute="full", zero1=False, **common)
    assert (kept["recompute"], kept["zero1"], full["recompute"], full["zero1"]) == ("none", True, "full", False)
    assert full["memory"]["activations_bytes"] < kept["memory"]["activations_bytes"] / 10
    assert full["memory"]["optimizer_bytes"] == kept["memory"]["optimizer_bytes"] * (64 // 8)  # dp 8, unsharded
    with pytest.raises(fulcrum.InputError, match="recompute"):
        fulcrum.simulate_training("packed", llama, h200, recompute="some")


def test_simulate_training_auto_takes_the_fastest_candidate_each_iteration():
    llama, h200 = fulcrum.model_shape("llama3-8b"), fulcrum.hardware("h200-dgx")
    common = dict(gpus=32, dataset="lognormal:9.5:1.5", max_doc_len=131072, tokens_per_rank=65536, iterations=3,
                  seed=3)
    auto = fulcrum.simulate_training("auto", llama, h200, cp=0, candidates=["distca", "packed"], **common)
    alone = {"distca": fulcrum.simulate_training("distca", llama, h200, **common),
             "packed": fulcrum.simulate_training("packed", llama, h200, mode="single-stream", **common)}
    for it, chosen in enumerate(auto["auto"]["chosen"]):
        best = min(alone, key=lambda name: alone[name]["iteration_s"][it])
        assert chosen == best
        assert auto["iteration_s"][it] == pytest.approx(alone[best]["iteration_s"][it], rel=1e-12)
    assert auto["auto"]["candidates"] == ["distca", "packed"]
    assert len(auto["auto"]["candidate_planning_s"]) == 2
    with pytest.raises(fulcrum.InputError, match="candidates: striped does not compute exactly the batch"):
        fulcrum.simulate_training("auto", llama, h200, candidates=["striped"])
    # A deferring candidate is allowed here (the run keeps its queue): what it computed and what its queue grew
    # by are the window's tokens.
    with_wlb = fulcrum.simulate_training("auto", llama, h200, cp=0, candidates=["wlb", "packed"], **common)
    assert with_wlb["auto"]["candidates"] == ["packed", "wlb"]  # exact candidates first: they value wlb
    computed = with_wlb["tokens_per_iteration"] * len(with_wlb["iteration_s"])
    drawn = alone["packed"]["tokens_per_iteration"] * 3
    assert computed + with_wlb["carried_tokens"] == pytest.approx(drawn, rel=1e-12)
    with pytest.raises(fulcrum.InputError, match="baseline_mode"):
        fulcrum.simulate_training("auto", llama, h200, baseline_mode="smoke")


def test_every_hardware_preset_matches_the_published_schema():
    schema = json.loads((Path(__file__).resolve().parents[2] / "docs" / "schemas" / "hardware.schema.json").read_text())
    for name in fulcrum.hardware_names():
        jsonschema.validate(fulcrum.hardware(name).to_dict(), schema)
