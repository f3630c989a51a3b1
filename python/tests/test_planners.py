import json
import pathlib
import threading
import time

import numpy as np
import pytest
from conftest import HEAVY_RANKS, HEAVY_TOKENS, heavy_lengths, heavy_options, whole_stripes

import fulcrum


def test_meta_planners_choose_and_are_not_made(model):
    assert fulcrum.meta_planner_names() == ["auto"]
    assert fulcrum.is_meta_planner("auto") and not fulcrum.is_meta_planner("distca")
    assert not set(fulcrum.meta_planner_names()) & set(fulcrum.planner_names())
    with pytest.raises(fulcrum.InputError, match="meta-planner"):
        fulcrum.make_planner("auto", fulcrum.PlannerOptions(model))
    # The loader turns the name into the Python AutoPlanner.
    loader = fulcrum.PlanAheadLoader([], "auto", ranks=2, tokens_per_rank=512)
    assert isinstance(loader._planner, fulcrum.AutoPlanner)
    loader.close()


@pytest.mark.parametrize("name", fulcrum.planner_names())
def test_every_planner_gives_a_verified_plan_as_arrays(name, model, batch):
    planner = fulcrum.make_planner(name, fulcrum.PlannerOptions(model, cp_degree=2))
    assert planner.name == name
    caps = planner.capabilities
    assert "causal" in caps.masks and isinstance(caps.moves_attention, bool)
    multiple = planner.document_length_multiple(batch.ranks)
    if any(d.length % multiple for d in batch.documents):
        with pytest.raises(fulcrum.InputError, match="whole blocks"):
            planner.plan(batch)
        batch = whole_stripes(planner, batch)
    assignment = planner.plan(batch)
    assert assignment.planner == name
    report = fulcrum.verify(assignment)
    assert report.ok and bool(report) and report.errors == [], report.summary()
    if caps.keeps_documents:
        assert fulcrum.verify(assignment, batch).ok
    assert fulcrum.verify_coverage(assignment).ok

    arrays = assignment.task_arrays()
    n = len(assignment.tasks)
    shapes = {"doc": (n,), "queries": (n, 2, 2), "keys": (n, 2), "server": (n,)}
    assert {k: v.shape for k, v in arrays.items()} == shapes
    assert all(v.dtype == np.int64 for v in arrays.values())
    for i, task in enumerate(assignment.tasks):
        assert arrays["doc"][i] == task.doc and arrays["server"][i] == task.server
        assert tuple(arrays["keys"][i]) == task.keys
        assert [tuple(r) for r in arrays["queries"][i][: len(task.queries)]] == task.queries
    assert ((arrays["server"] >= 0) & (arrays["server"] < batch.ranks)).all()

    transfers = assignment.transfer_arrays()
    assert transfers["tokens"].shape == (len(assignment.transfers), 2)
    for i, t in enumerate(assignment.transfers):
        assert (transfers["kind"][i], transfers["src"][i], transfers["dst"][i]) == (int(t.kind), t.src, t.dst)
        assert tuple(transfers["tokens"][i]) == t.tokens


def test_distca_moves_attention_and_is_deterministic(model, batch, assignment):
    again = fulcrum.make_planner("distca", fulcrum.PlannerOptions(model)).plan(batch)
    for name in ["doc", "queries", "keys", "server"]:
        assert (assignment.task_arrays()[name] == again.task_arrays()[name]).all()
    assert any(t.kind == fulcrum.TensorKind.Q for t in assignment.transfers)
    assert all(t.heads is None for t in assignment.tasks)  # DistCA's tasks cover every head
    assert all(t.heads is None for t in assignment.transfers)  # so its transfers move whole rows


def test_dcp_head_blocks_give_tasks_over_whole_gqa_groups(model, batch):
    assert fulcrum.make_planner("dcp", fulcrum.PlannerOptions(model)).capabilities.splits_heads
    assert not fulcrum.make_planner("distca", fulcrum.PlannerOptions(model)).capabilities.splits_heads
    planner = fulcrum.make_planner("dcp", fulcrum.PlannerOptions(model, dcp_block=512, dcp_head_blocks=4))
    assignment = planner.plan(batch)
    assert fulcrum.verify(assignment, batch).ok
    per_block = model.q_heads // 4  # llama3-8b: 32 q heads in 8 GQA groups, 2 groups per head block
    assert {t.heads for t in assignment.tasks} == {(h * per_block, (h + 1) * per_block) for h in range(4)}
    with pytest.raises(fulcrum.InputError, match=r"dcp-head-blocks = 3: must divide the model's kv_heads = 8"):
        fulcrum.make_planner("dcp", fulcrum.PlannerOptions(model, dcp_head_blocks=3))


def test_bad_options_name_the_field(model):
    with pytest.raises(fulcrum.InputError, match=r"tolerance = -1: must be in \[0, 10\]"):
        fulcrum.PlannerOptions(model, tolerance=-1)
    with pytest.raises(fulcrum.InputError, match=r"dcp-divisions = 2\.5: must be a whole number"):
        fulcrum.PlannerOptions(model, dcp_divisions=2.5)
    with pytest.raises(fulcrum.InputError, match="planner option 'nope'"):
        fulcrum.PlannerOptions(model, nope=1)
    with pytest.raises(fulcrum.InputError, match="planner"):
        fulcrum.make_planner("nope", fulcrum.PlannerOptions(model))


def test_every_planner_option_is_settable_from_python(model):
    specs = fulcrum.planner_options()
    names = {s.name for s in specs}
    assert {"tolerance", "granularity", "cp-degree", "wlb-token-cap", "dcp-block", "dcp-divisions"} <= names
    kinds = {"real": float, "integer": int, "flag": bool}
    for spec in specs:
        value = {"real": (spec.min + spec.max) / 2, "integer": spec.max, "flag": not spec.default}[spec.kind]
        options = fulcrum.PlannerOptions(model, **{spec.name.replace("-", "_"): value})
        assert options.get(spec.name) == value and options.values[spec.name] == value
        # Each value reads back as its kind: a float, an int, or a bool for a flag.
        assert type(options.get(spec.name)) is kinds[spec.kind], spec.name
        assert getattr(fulcrum.PlannerOptions(model), spec.name.replace("-", "_")) == spec.default
    assert {s.name for s in specs if s.kind == "flag"} == {"partial-kv", "rehome", "mtraining-hierarchical"}
    with pytest.raises(fulcrum.InputError, match="partial-kv = 2: must be 0 \\(off\\) or 1 \\(on\\)"):
        fulcrum.PlannerOptions(model, partial_kv=2)


def test_the_committed_plan_schema_holds_the_generated_option_schema():
    # docs/schemas/plan.schema.json's options are generated from the declarations; after changing an option,
    # write fulcrum.planner_options_schema() there (json.dumps(..., indent=2)).
    root = pathlib.Path(__file__).resolve().parents[2]
    schema = json.loads((root / "docs" / "schemas" / "plan.schema.json").read_text())
    assert schema["properties"]["config"]["properties"]["options"] == fulcrum.planner_options_schema()


@pytest.mark.timing
def test_planning_releases_the_gil(model):
    # While a worker thread is inside the C++ planner, this thread keeps running Python. Were the GIL held
    # for the call, this loop would stall for the whole planning time.
    big = fulcrum.pack_batch(fulcrum.documents(heavy_lengths(9)), HEAVY_RANKS, HEAVY_TOKENS)
    planner = fulcrum.make_planner("distca", heavy_options())
    start = time.perf_counter()
    planner.plan(big)
    plan_s = time.perf_counter() - start
    assert plan_s > 0.05, "the batch plans too fast to measure the GIL"
    worker = threading.Thread(target=planner.plan, args=(big,))
    stamps = [time.perf_counter()]  # counts the wait for the worker's start too
    worker.start()
    while worker.is_alive():
        stamps.append(time.perf_counter())
    worker.join()
    gaps = np.diff(stamps)
    assert len(stamps) > 100 and gaps.max() < plan_s / 2, (len(stamps), gaps.max(), plan_s)


def test_choose_plan_takes_the_candidate_whose_plan_simulates_fastest(model, batch):
    h200 = fulcrum.hardware("h200-dgx")
    options = fulcrum.PlannerOptions(model)
    choice = fulcrum.choose_plan(batch, options, h200, candidates=["distca", "packed", "perdoc-cp"])
    assert choice["chosen"] in ("distca", "packed", "perdoc-cp") and choice["runner_up"] != choice["chosen"]
    assert choice["chosen_s"] <= choice["runner_up_s"]
    assert choice["assignment"].planner == choice["chosen"]
    assert fulcrum.verify(choice["assignment"], batch).ok
    assert len(choice["planning_s"]) == 3 and choice["refused"] == []
    # One candidate alone is chosen, with no runner-up.
    alone = fulcrum.choose_plan(batch, options, h200, candidates=["packed"])
    assert alone["chosen"] == "packed" and alone["runner_up"] is None
    with pytest.raises(fulcrum.InputError, match="candidates: wlb defers documents to later batches"):
        fulcrum.choose_plan(batch, options, h200, candidates=["wlb"])
    with pytest.raises(fulcrum.InputError, match="baseline_mode"):
        fulcrum.choose_plan(batch, options, h200, baseline_mode="smoke")
    for tp in (0, 3):
        with pytest.raises(fulcrum.InputError, match=f"tp = {tp}: must divide the 8 GPUs"):
            fulcrum.choose_plan(batch, options, h200, tp=tp)
