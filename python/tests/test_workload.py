import json
from pathlib import Path

import numpy as np
import pytest
from conftest import RANKS, TOKENS_PER_RANK, whole_stripes

import fulcrum

# Also run against the installed wheel (scripts/test_python_package.sh, CI's python-package step).
pytestmark = pytest.mark.package


def test_model_shapes():
    names = fulcrum.model_shape_names()
    assert "llama3-8b" in names and "tiny" in names
    shape = fulcrum.model_shape("tiny")
    assert (shape.q_heads, shape.kv_heads, shape.head_dim) == (4, 2, 64)
    shape.kv_heads = 3
    with pytest.raises(fulcrum.InputError, match="kv_heads"):
        shape.validate()


def test_masks_round_trip_their_text():
    for text in ["causal", "full", "window:64", "lambda:4:32", "blockwise:64:2", "vslash:0,5:0,1",
                 "vsblocks:64:0,17:0,1,5", "striped:4:64:vsblocks:64:0,17:0,1,5"]:
        assert str(fulcrum.Mask(text)) == text
    assert fulcrum.Mask("window:64").kind == "window"
    assert fulcrum.Mask("striped:4:64:vsblocks:64:0,17:0,1,5").kind == "striped"
    assert fulcrum.Mask.striped(fulcrum.Mask.vertical_slash_blocks(64, [17, 0], [5, 1, 0]), 4, 64) == \
        fulcrum.Mask("striped:4:64:vsblocks:64:0,17:0,1,5")
    assert fulcrum.Mask("causal") == fulcrum.Mask()
    with pytest.raises(fulcrum.InputError, match="mask"):
        fulcrum.Mask("nonsense")


def test_documents_and_packing(batch):
    assert batch.ranks == RANKS and batch.tokens_per_rank == TOKENS_PER_RANK
    assert batch.total_tokens() == RANKS * TOKENS_PER_RANK
    segments = batch.segment_array()
    assert segments.dtype == np.int64 and segments.shape == (len(batch.segments), 4)
    per_rank = np.bincount(segments[:, 3], weights=segments[:, 2] - segments[:, 1])
    assert per_rank.tolist() == [TOKENS_PER_RANK] * RANKS
    first = batch.segments[0]
    assert (first.doc, *first.tokens, first.rank) == tuple(segments[0])
    docs = fulcrum.documents([5, 7], mask="window:2", first_id=10)
    assert [(d.id, d.length, str(d.mask)) for d in docs] == [(10, 5, "window:2"), (11, 7, "window:2")]


def test_documents_carry_per_head_masks():
    doc = fulcrum.Document(0, 64)
    assert doc.head_masks == []
    doc.head_masks = [fulcrum.Mask("causal"), "window:8"]
    assert [str(m) for m in doc.head_masks] == ["causal", "window:8"]


def test_length_sources_are_seeded():
    a = fulcrum.make_length_source("lognormal:7:1", seed=1).take(50)
    b = fulcrum.make_length_source("lognormal:7:1", seed=1).take(50)
    c = fulcrum.make_length_source("lognormal:7:1", seed=2).take(50)
    assert a.dtype == np.int64 and (a == b).all() and not (a == c).all() and (a >= 1).all()
    source = fulcrum.make_length_source("uniform:3:3", seed=0)
    assert next(iter(source)) == 3 and source.next() == 3
    for spec in ["pretrain", "prolong"]:
        assert fulcrum.make_length_source(spec, seed=0, tokens_per_rank=65536).take(3).min() >= 1


def test_batch_stream_carries_cut_documents():
    stream = fulcrum.BatchStream(fulcrum.make_length_source("uniform:500:1500", seed=4), ranks=2, tokens_per_rank=1024)
    first, second = stream.next(), next(stream)
    assert first.total_tokens() == second.total_tokens() == 2048
    ids = [d.id for d in first.documents] + [d.id for d in second.documents]
    assert len(ids) == len(set(ids))


def test_errors_carry_the_engine_message():
    # The message is the C++ one, unchanged (length_source.cpp), and the class says it is bad input.
    with pytest.raises(fulcrum.InputError) as caught:
        fulcrum.make_length_source("bogus", seed=0)
    assert str(caught.value) == (
        "dataset = 'bogus': expected pretrain, prolong, uniform:MIN:MAX, lognormal:MU:SIGMA or file:PATH")
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, fulcrum.Error)
    assert issubclass(fulcrum.Error, RuntimeError) and not issubclass(fulcrum.Error, ValueError)
    with pytest.raises(fulcrum.InputError, match=r"^ranks = 0: must be >= 1$"):
        fulcrum.pack_batch(fulcrum.documents([10]), 0, 16)
    with pytest.raises(fulcrum.InputError, match="count = -1"):
        fulcrum.make_length_source("uniform:1:2").take(-1)


def test_pack_batch_drops_nothing():
    # 5 + 20 + 4 tokens do not fit in 2 x 8: an error naming the document that would be cut, not a cut.
    with pytest.raises(fulcrum.InputError, match="document 1 would be cut at token 11"):
        fulcrum.pack_batch(fulcrum.documents([5, 20, 4]), 2, 8)


def test_head_tail_packing_gives_each_rank_a_head_and_a_tail_piece():
    # 640 tokens over ranks of 256: heads 128, 128, 64 from the start, tails 128, 128, 64 from the end.
    batch = fulcrum.pack_batch(fulcrum.documents([640, 128]), 3, 256, boundary_split="head-tail")
    assert [(s.doc, s.tokens, s.rank) for s in batch.segments] == [
        (0, (0, 128), 0), (0, (128, 256), 1), (0, (256, 320), 2), (0, (320, 384), 2), (0, (384, 512), 1),
        (0, (512, 640), 0), (1, (0, 128), 2)]
    stream = fulcrum.BatchStream(fulcrum.make_length_source("uniform:64:700", 1), 4, 256,
                                 boundary_split="head-tail")
    per_rank = [0] * 4
    for s in stream.next().segments:
        per_rank[s.rank] += s.tokens[1] - s.tokens[0]
    assert per_rank == [256] * 4
    with pytest.raises(fulcrum.InputError, match=r"^boundary_split = 'zigzag': must be contiguous or head-tail$"):
        fulcrum.pack_batch(fulcrum.documents([10]), 1, 16, boundary_split="zigzag")


def test_batch_from_cu_seqlens_keeps_the_loaders_layout():
    torch = pytest.importorskip("torch")
    lengths = [[3, 5], [8], [2, 2, 3]]
    per_rank = [[0, 192, 512], np.array([0, 512]), torch.tensor([0, 128, 256, 448], dtype=torch.int32)]
    batch = fulcrum.Batch.from_cu_seqlens(per_rank, mask="causal", first_id=100)
    assert batch.ranks == 3 and batch.tokens_per_rank == 512
    assert [d.length for d in batch.documents] == [64 * n for rank in lengths for n in rank]
    assert [d.id for d in batch.documents] == list(range(100, 106))
    assert [(s.rank, s.tokens[1]) for s in batch.segments] == [(r, 64 * n) for r, rank in enumerate(lengths)
                                                                for n in rank]
    # Every planner plans it; those that keep documents (all but wlb, which defers some) compute exactly
    # these documents.
    model = fulcrum.model_shape("llama3-8b")
    for name in fulcrum.planner_names():
        planner = fulcrum.make_planner(name, fulcrum.PlannerOptions(model, cp_degree=1))
        fitted = whole_stripes(planner, batch)
        assignment = planner.plan(fitted)
        if planner.capabilities.keeps_documents:
            assert fulcrum.verify(assignment, fitted).ok, name
        else:
            assert fulcrum.verify(assignment).ok, name


@pytest.mark.parametrize(
    ("per_rank", "kwargs", "message"),
    [
        ([[1, 3]], {}, r"per_rank_cu_seqlens\[0\]: must start with 0"),
        ([[0, 3, 3]], {}, r"per_rank_cu_seqlens\[0\]\[2\] = 3: must be greater"),
        ([[0, 3], [0, 9]], {"tokens_per_rank": 8}, r"lengths\[1\]: rank 1 holds 9 tokens"),
        ([], {}, "no ranks"),
    ],
)
def test_batch_from_cu_seqlens_names_the_bad_entry(per_rank, kwargs, message):
    with pytest.raises(fulcrum.InputError, match=message):
        fulcrum.Batch.from_cu_seqlens(per_rank, **kwargs)


DATA_MODELS = Path(__file__).resolve().parents[2] / "data" / "models"


def test_model_shape_takes_what_the_cli_model_option_takes():
    preset = fulcrum.model_shape("qwen2.5-3b")
    config = DATA_MODELS / "qwen2.5-3b" / "config.json"
    for source in (config, str(config), json.loads(config.read_text()) | {"name": "qwen2.5-3b"}):
        assert fulcrum.model_shape_json(fulcrum.model_shape(source)) == fulcrum.model_shape_json(preset)
    own = fulcrum.model_shape_json(preset) | {"name": "own", "q_heads": 32}
    assert fulcrum.model_shape(own).q_heads == 32


def test_model_shape_reads_a_transformers_config():
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(hidden_size=256, intermediate_size=688, num_attention_heads=4,
                                      num_key_value_heads=2, num_hidden_layers=2, rope_theta=10000.0,
                                      rms_norm_eps=1e-5)
    shape = fulcrum.model_shape(config)
    tiny = fulcrum.model_shape("tiny")
    for field in ("layers", "hidden", "q_heads", "kv_heads", "head_dim", "ffn_hidden", "rms_norm_eps", "rope_theta"):
        assert getattr(shape, field) == getattr(tiny, field), field


def test_model_shape_names_a_bad_field():
    with pytest.raises(fulcrum.InputError, match=r"model\.num_key_value_heads = 3"):
        fulcrum.model_shape({"hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 8,
                             "num_hidden_layers": 2, "num_key_value_heads": 3})
    with pytest.raises(fulcrum.InputError, match="neither a preset"):
        fulcrum.model_shape("llama-8b")
