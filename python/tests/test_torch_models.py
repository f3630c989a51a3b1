"""Models on packed documents: fulcrum.torch.packed's reference attention and rows, the plain Llama example
(python/examples/llama_model.py), transformers' Llama with attn_implementation="fulcrum" (with the
reference attention, and with fulcrum.torch.attention on a 1-rank gloo group), and the training example
(python/examples/train_llama.py) on one process and under torchrun. Distributed training against one
process, for every planner: test_torch_training.py.

Tolerances: fp64 checks 1e-10 (the operations differ only in summation order, errors ~1e-15); fp32 losses
1e-5 relative (different attention kernels and summation orders: seen ~2e-7).
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the models need PyTorch (pip install .[torch])")

import fulcrum.torch as ft  # noqa: E402
import torch.distributed as dist  # noqa: E402
from fulcrum.torch.packed import PackedRows, Piece, reference_attention  # noqa: E402

import fulcrum  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
sys.path.insert(0, str(EXAMPLES))
import llama_model  # noqa: E402
import train_llama  # noqa: E402
from conftest import whole_stripes  # noqa: E402

FP64_TOLERANCE = 1e-10
LOSS_RTOL = 1e-5


def per_document_attention(q, k, v, rows: PackedRows, scale: float):
    """Plain causal attention of each piece's rows over its document's keys, written out (no SDPA)."""
    group = q.shape[1] // k.shape[1]
    o = torch.zeros_like(q)
    by_position = {(p.doc, t): p.row + t - p.begin for p in rows.pieces for t in range(p.begin, p.end)}
    for p in rows.pieces:
        keys = torch.tensor([by_position[p.doc, t] for t in range(p.end)])
        kd = k[keys].repeat_interleave(group, dim=1)
        vd = v[keys].repeat_interleave(group, dim=1)
        qd = q[p.row : p.row + p.end - p.begin]
        scores = torch.einsum("qhd,khd->hqk", qd, kd) * scale
        visible = torch.arange(p.end)[None, :] <= torch.arange(p.begin, p.end)[:, None]
        scores = scores.masked_fill(~visible, -math.inf)
        o[p.row : p.row + p.end - p.begin] = torch.einsum("hqk,khd->qhd", torch.softmax(scores, dim=-1), vd)
    return o


def scrambled_rows() -> PackedRows:
    """Three documents; document 0 in two pieces at non-adjacent rows, its tail first."""
    lengths = [70, 33, 1]
    pieces = [(0, 40, 70), (1, 0, 33), (2, 0, 1), (0, 0, 40)]
    out, row = [], 0
    for doc, begin, end in pieces:
        out.append(Piece(doc, begin, end, row))
        row += end - begin
    return PackedRows(out, lengths)


def test_reference_attention_equals_per_document_attention_fp64():
    rows = scrambled_rows()
    g = torch.Generator().manual_seed(3)
    q = torch.randn(rows.rows, 4, 16, dtype=torch.float64, generator=g, requires_grad=True)
    k = torch.randn(rows.rows, 2, 16, dtype=torch.float64, generator=g, requires_grad=True)
    v = torch.randn(rows.rows, 2, 16, dtype=torch.float64, generator=g, requires_grad=True)
    weight = torch.randn(rows.rows, 4, 16, dtype=torch.float64, generator=g)
    got = reference_attention(rows)(q, k, v, scale=0.25)
    grads = torch.autograd.grad((got * weight).sum(), (q, k, v))
    want = per_document_attention(q, k, v, rows, 0.25)
    want_grads = torch.autograd.grad((want * weight).sum(), (q, k, v))
    assert (got - want).abs().max().item() <= FP64_TOLERANCE
    for a, b in zip(grads, want_grads, strict=True):
        assert (a - b).abs().max().item() <= FP64_TOLERANCE
    assert rows.positions().tolist() == list(range(40, 70)) + list(range(33)) + [0] + list(range(40))


def test_reference_attention_refuses_rows_it_cannot_compute():
    # Document 0's tokens [0, 40) are on another rank: its keys are not here.
    tail_only = PackedRows([Piece(0, 40, 70, 0)], [70])
    with pytest.raises(fulcrum.InputError, match=r"document 0's tokens \[0, 40\) are not on this rank"):
        reference_attention(tail_only)
    with pytest.raises(fulcrum.InputError, match="mask 'full'"):
        reference_attention(PackedRows([Piece(0, 0, 5, 0)], [5], ["full"]))
    with pytest.raises(fulcrum.InputError, match=r"pieces\[1\].row = 3: must be 5"):
        PackedRows([Piece(0, 0, 5, 0), Piece(1, 0, 2, 3)], [5, 2])
    with pytest.raises(fulcrum.InputError, match=r"pieces\[0\].tokens = \[0, 9\)"):
        PackedRows([Piece(0, 0, 9, 0)], [5])
    with pytest.raises(fulcrum.InputError, match="q: shape"):
        reference_attention(scrambled_rows())(torch.zeros(3, 4, 16), torch.zeros(3, 2, 16), torch.zeros(3, 2, 16),
                                              scale=1.0)


def test_rows_from_a_batch_are_the_ranks_segments():
    batch = fulcrum.pack_batch(fulcrum.documents([300, 100, 150]), 2, 275)
    rows = [PackedRows.from_batch(batch, r) for r in range(2)]
    assert [(p.doc, p.begin, p.end, p.row) for p in rows[0].pieces] == [(0, 0, 275, 0)]
    assert [(p.doc, p.begin, p.end, p.row) for p in rows[1].pieces] == [(0, 275, 300, 0), (1, 0, 100, 25),
                                                                          (2, 0, 150, 125)]
    with pytest.raises(fulcrum.InputError, match=r"rank = 2: must be in \[0, 2\)"):
        PackedRows.from_batch(batch, 2)


@pytest.mark.parametrize("planner", fulcrum.planner_names())
def test_rows_of_a_compiled_step_are_the_assignments_segments(planner):
    """The training loop may take a rank's rows from the StepPlan (fulcrum.torch.attention's order) or from
    the Assignment's batch (the reference's): they must be the same rows."""
    batch = fulcrum.pack_batch(fulcrum.documents([700, 90, 300, 150, 800]), 2, 1020)
    options = fulcrum.PlannerOptions(train_llama.model_shape(SMALL), devices_per_machine=2, granularity=32,
                                     dcp_block=64, cp_degree=2)
    made = fulcrum.make_planner(planner, options)
    assignment = made.plan(whole_stripes(made, batch))
    step = ft.compile_step(assignment, options.model)
    if made.document_length_multiple(2) > 1:  # striped layouts: permuted rows, which model layers cannot take
        with pytest.raises(fulcrum.InputError, match="stored permuted"):
            PackedRows.from_step(step, 0)
        return
    for rank in range(2):
        from_step, from_batch = PackedRows.from_step(step, rank), PackedRows.from_batch(assignment.batch, rank)
        assert from_step.pieces == from_batch.pieces and from_step.doc_lengths == from_batch.doc_lengths


SMALL = llama_model.LlamaConfig(vocab_size=64, hidden=32, layers=2, q_heads=4, kv_heads=2, head_dim=8, ffn_hidden=48)


def test_plain_model_is_deterministic_and_documents_do_not_see_each_other():
    rows = scrambled_rows()
    tokens = torch.randint(0, SMALL.vocab_size, (rows.rows,), generator=torch.Generator().manual_seed(1))
    labels = torch.roll(tokens, -1)
    runs = []
    for _ in range(2):
        torch.manual_seed(5)
        model = llama_model.LlamaModel(SMALL).double()
        logits = model(tokens, rows.positions(), reference_attention(rows))
        llama_model.token_loss_sum(logits, labels).backward()
        runs.append((logits.detach(), [p.grad.clone() for p in model.parameters()]))
    assert torch.equal(runs[0][0], runs[1][0])
    assert all(torch.equal(a, b) for a, b in zip(runs[0][1], runs[1][1], strict=True))
    # Each document alone, in position order, gives its rows' packed logits: no attention across
    # documents, and RoPE's positions restart per document.
    packed = runs[0][0]
    for doc, length in enumerate(rows.doc_lengths):
        alone = PackedRows([Piece(0, 0, length, 0)], [length])
        index = torch.tensor([p.row + t - p.begin for p in rows.pieces if p.doc == doc for t in range(p.begin, p.end)])
        index = index[torch.argsort(torch.tensor([t for p in rows.pieces if p.doc == doc
                                                  for t in range(p.begin, p.end)]))]
        got = model(tokens[index], alone.positions(), reference_attention(alone))
        assert (got - packed[index]).abs().max().item() <= FP64_TOLERANCE


@pytest.fixture(scope="module")
def one_rank_group(tmp_path_factory):
    """A 1-rank gloo process group for fulcrum.torch.attention, torn down after this module."""
    if dist.is_initialized():
        pytest.skip("torch.distributed is already initialised in this process")
    store = tmp_path_factory.mktemp("gloo") / "store"
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    yield dist.group.WORLD
    dist.destroy_process_group()


@pytest.fixture(scope="module")
def transformers_module():
    os.environ["HF_HUB_OFFLINE"] = "1"
    return pytest.importorskip("transformers", reason="the HF integration needs transformers (pip install .[hf])")


@pytest.mark.parametrize("attention", ["reference", "fulcrum"])
def test_hf_fulcrum_attention_trains_like_transformers_sdpa(transformers_module, one_rank_group, attention):
    """Same documents, same initial weights, same optimizer: per-step losses of the packed fulcrum path
    (one row, position_ids restarting per document; the reference attention, or fulcrum.torch.attention
    over a compiled plan on a 1-rank gloo group) equal transformers' sdpa on the documents as a
    right-padded batch."""
    import fulcrum.torch.hf as fhf

    config = llama_model.LlamaConfig(vocab_size=128, hidden=64, layers=2, q_heads=4, kv_heads=2, head_dim=16,
                                     ffn_hidden=96, tie_embeddings=False)
    shape = train_llama.model_shape(config)
    torch.manual_seed(0)
    packed_model = transformers_module.LlamaForCausalLM(train_llama.hf_config(config, 1024, fhf.NAME))
    padded_model = transformers_module.LlamaForCausalLM(train_llama.hf_config(config, 1024, "sdpa"))
    padded_model.load_state_dict(packed_model.state_dict())
    optimizers = [torch.optim.AdamW(m.parameters(), lr=1e-3) for m in (packed_model, padded_model)]
    stream = fulcrum.BatchStream(fulcrum.make_length_source("uniform:16:160", seed=4, tokens_per_rank=512), 1, 512)
    losses = {"fulcrum": [], "sdpa": []}
    for step in range(3):
        batch = next(stream)
        assert len(batch.documents) > 1
        rows = PackedRows.from_batch(batch, 0)
        tokens, labels = train_llama.rank_inputs(batch, rows, config.vocab_size, seed=step)
        count = train_llama.labelled_rows(batch)
        if attention == "reference":
            context = fhf.attention_context(reference_attention(rows), rows)
        else:
            assignment = fulcrum.make_planner("packed", fulcrum.PlannerOptions(shape)).plan(batch)
            context = fhf.plan_context(ft.compile_step(assignment, shape), one_rank_group)

        with context:
            logits = packed_model(input_ids=tokens[None], position_ids=rows.positions()[None], use_cache=False).logits
        loss = llama_model.token_loss_sum(logits[0], labels) / count
        losses["fulcrum"].append(loss.item())
        loss.backward()

        # The same documents as a padded batch for sdpa: one sequence each, padding masked out.
        lengths = [d.length for d in batch.documents]
        ids = torch.zeros(len(lengths), max(lengths), dtype=torch.int64)
        padded_labels = torch.full_like(ids, llama_model.IGNORE)
        mask = torch.zeros_like(ids)
        for i, p in enumerate(rows.pieces):  # one piece per document on one rank
            n = p.end - p.begin
            ids[i, :n], padded_labels[i, :n], mask[i, :n] = tokens[p.row : p.row + n], labels[p.row : p.row + n], 1
        logits = padded_model(input_ids=ids, attention_mask=mask, use_cache=False).logits
        loss = llama_model.token_loss_sum(logits.reshape(-1, config.vocab_size), padded_labels.reshape(-1)) / count
        losses["sdpa"].append(loss.item())
        loss.backward()
        for o in optimizers:
            o.step()
            o.zero_grad()
    assert losses["fulcrum"] == pytest.approx(losses["sdpa"], rel=LOSS_RTOL)
    assert losses["fulcrum"][2] < losses["fulcrum"][0]  # it trains


def test_hf_fulcrum_attention_refuses_calls_it_cannot_serve(transformers_module):
    import fulcrum.torch.hf as fhf

    torch.manual_seed(0)
    model = transformers_module.LlamaForCausalLM(train_llama.hf_config(SMALL, 64, fhf.NAME))
    rows = PackedRows([Piece(0, 0, 6, 0), Piece(1, 0, 4, 6)], [6, 4])
    ids = torch.zeros(1, rows.rows, dtype=torch.int64)
    with pytest.raises(fulcrum.InputError, match=r"inside fulcrum\.torch\.hf\.attention_context"):
        model(input_ids=ids, position_ids=rows.positions()[None], use_cache=False)
    with fhf.attention_context(reference_attention(rows), rows):
        with pytest.raises(fulcrum.InputError, match="position_ids"):
            model(input_ids=ids, position_ids=torch.arange(rows.rows)[None], use_cache=False)
        with pytest.raises(fulcrum.InputError, match="query: shape"):
            model(input_ids=ids[:, :5], position_ids=rows.positions()[None, :5], use_cache=False)
        model(input_ids=ids, position_ids=rows.positions()[None], use_cache=False)


def test_train_llama_runs_two_steps_on_one_process(tmp_path, transformers_module):
    """The training example end to end: transformers' model, fulcrum.torch.attention on a 1-rank group."""
    out = tmp_path / "steps.json"
    command = [sys.executable, str(EXAMPLES / "train_llama.py"), "--steps", "2", "--tokens-per-rank", "512",
               "--model", "hf", "--json", str(out)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300,
                            env={**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"})
    assert result.returncode == 0, result.stdout + result.stderr
    steps = json.loads(out.read_text())["steps"]
    assert [s["step"] for s in steps] == [0, 1]
    assert all(math.isfinite(s["loss"]) and 3 < s["loss"] < 10 for s in steps)
    assert "step   1  loss" in result.stdout


def test_train_llama_runs_under_torchrun(tmp_path):
    """The example's multi-process launch (torchrun's environment, 2 ranks, DistCA's plans) end to end. Whether
    2 and 4 ranks train exactly as one process, for every planner, is test_torch_training.py's job."""
    out = tmp_path / "steps.json"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
               str(EXAMPLES / "train_llama.py"), "--steps", "2", "--dataset", "uniform:16:900", "--tokens-per-rank",
               "512", "--threads", "1", "--json", str(out)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert result.returncode == 0, result.stdout + result.stderr
    run = json.loads(out.read_text())
    assert run["world"] == 2 and [s["tokens"] for s in run["steps"]] == [1024, 1024]
    assert all(math.isfinite(s["loss"]) and s["imbalance_plan"] >= 1 for s in run["steps"])
