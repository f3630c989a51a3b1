"""The table-driven bad-input suite's Python half (the CLI's is apps/fulcrum/bad_input_test.py): each entry
point given a value it cannot use raises fulcrum.InputError whose message names the field, never a crash,
an unrelated exception or a silently wrong answer."""
import tempfile
from pathlib import Path

import numpy as np
import pytest

import fulcrum

# Also run against the installed wheel (scripts/test_python_package.sh, CI's python-package step).
pytestmark = pytest.mark.package

F = fulcrum
SOURCE = "uniform:1:10"
# 100,000 levels deep: overflowed the JSON parser's stack and killed the interpreter.
DEEP = Path(tempfile.mkdtemp()) / "deep.json"
DEEP.write_text("[" * 100000 + "]" * 100000)


def kernel_inputs(rows=8, heads=2, dim=16):
    q = np.zeros((rows, heads, dim), dtype=np.float32)
    return q, q.copy(), q.copy()


CASES = [
    (lambda: F.make_length_source("nosuch"), "dataset = 'nosuch'"),
    (lambda: F.make_length_source("uniform:10:5"), "dataset = 'uniform:10:5'"),
    (lambda: F.make_length_source("uniform:0:5"), "dataset = 'uniform:0:5'"),
    (lambda: F.make_length_source("lognormal:x:1"), "dataset = 'lognormal:x:1'"),
    (lambda: F.make_length_source("file:/nonexistent/lengths.txt"), "/nonexistent/lengths.txt"),
    (lambda: F.make_length_source("lognormal:8:inf"), "dataset = 'lognormal:8:inf'"),
    (lambda: F.make_length_source("lognormal:8:1e308"), "dataset = 'lognormal:8:1e308'"),
    (lambda: F.make_length_source("pretrain", tokens_per_rank=-5), "tokens-per-rank = -5"),
    (lambda: F.model_shape("nosuch"), "model = 'nosuch'"),
    (lambda: F.model_shape(str(DEEP)), "deep.json: nested deeper than the 512 levels"),
    (lambda: F.hardware(str(DEEP)), "deep.json: nested deeper"),
    (lambda: F.hardware("h200-dgx").attention_forward_s(-1, 4, 1.0), "q_len = -1"),
    (lambda: F.hardware("h200-dgx").attention_backward_s(4, -1, 1.0), "k_len = -1"),
    (lambda: F.hardware("h200-dgx").attention_forward_s(4, 4, -1.0), "flops = -1"),
    (lambda: F.hardware("h200-dgx").attention_forward_s(4, 4, float("nan")), "flops = nan"),
    (lambda: F.hardware("h200-dgx").linear_s(-1e12), "flops = -1"),
    (lambda: F.Plan.from_bytes(b"\xff\xfe\x00\x01" + bytes(64)), "bad magic '\\xff\\xfe\\x00\\x01'"),
    (lambda: F.hardware("nosuch"), "hardware = 'nosuch'"),
    (lambda: F.make_planner("nosuch", F.PlannerOptions(F.model_shape("tiny"))), "planner = 'nosuch'"),
    (lambda: F.documents([0]), "document 0: length = 0"),
    (lambda: F.documents([100, -5]), "document 1: length = -5"),
    (lambda: F.documents([2**31]), "document 0: document length = 2147483648"),
    (lambda: F.documents([10], "striped:4:1:causal"), "document 0"),
    (lambda: F.pack_batch(F.documents([10]), 0, 16), "ranks = 0"),
    (lambda: F.pack_batch(F.documents([10]), 4, 0), "tokens-per-rank = 0"),
    (lambda: F.pack_batch(F.documents([10]), 65537, 16), "ranks = 65537"),
    (lambda: F.pack_batch(F.documents([70000] * 10), 4, 4096), "document 0 would be cut"),
    (lambda: F.BatchStream(F.make_length_source(SOURCE), 0, 16), "ranks = 0"),
    (lambda: F.BatchStream(F.make_length_source(SOURCE), 4, 0), "tokens-per-rank = 0"),
    (lambda: F.BatchStream(None, 4, 4096), "source = None"),
    (lambda: F.Mask(""), "mask = ''"),
    (lambda: F.Mask("nosuch"), "mask = 'nosuch'"),
    (lambda: F.Mask("window:0"), "mask window = 0"),
    (lambda: F.Mask("window:x"), "mask window = 'x'"),
    (lambda: F.Mask("lambda:-1:4"), "mask sink = -1"),
    (lambda: F.Mask("blockwise:0:1"), "mask block = 0"),
    (lambda: F.Mask("shared-question:1:100"), "mask question percent = 100"),
    (lambda: F.Mask("vslash:-3:0"), "mask vertical = -3"),
    (lambda: F.Mask("window:1099511627776"), "mask window = 1099511627776"),
    (lambda: F.Mask.vertical_slash_blocks(0, [0], [0]), "mask block = 0"),
    (lambda: F.Mask.vertical_slash_blocks(64, [-1], [0]), "mask vertical = -1"),
    (lambda: F.Mask.vertical_slash_blocks(64, [0], [2**40]), "mask block offset = 1099511627776"),
    (lambda: F.Mask.striped(F.Mask(), 0, 4), "mask ranks = 0"),
    (lambda: F.Mask.striped(F.Mask(), 4, 0), "mask block = 0"),
    (lambda: F.attention_pairs("causal", [(0, -10)], (0, 10), 10), "queries[0] = [0, -10)"),
    (lambda: F.attention_pairs("causal", [(-1, 5)], (0, 10), 10), "queries[0] = [-1, 5)"),
    (lambda: F.attention_pairs("causal", [(0, 5)], (0, 5, 9), 10), "range: got 3 values"),
    (lambda: F.attention_pairs("causal", [(0, 20)], (0, 20), 10), "queries[0] = [0, 20)"),
    (lambda: F.attention_pairs("causal", [(0, 5)], (3, 11), 10), "keys = [3, 11)"),
    (lambda: F.attention_pairs("causal", [(0, 4)], (0, 4), 0), "doc_len = 0"),
    (lambda: F.attention_pairs("causal", [(0, 5)], (0, 5), 2**33), "document length = 8589934592"),
    (lambda: F.attention_pairs("striped:4:1:causal", [(0, 5)], (0, 5), 10), "must be a multiple of ranks x block"),
    (lambda: F.mask_matrix("causal", [(5, 2)], (0, 5), 10), "queries[0] = [5, 2)"),
    (lambda: F.attention_forward_flops(F.model_shape("tiny"), "causal", [(0, 4)], (0, 4), -1), "doc_len = -1"),
]


@pytest.mark.parametrize("call, field", CASES, ids=[field for _, field in CASES])
def test_bad_input_raises_input_error_naming_the_field(call, field):
    with pytest.raises(fulcrum.InputError) as raised:
        call()
    assert field in str(raised.value)
    assert "\n" not in str(raised.value).strip()


def test_every_entry_point_of_the_table_is_exported():
    # The table calls what users call: a renamed entry point must not silently drop its cases.
    for name in ["make_length_source", "model_shape", "hardware", "make_planner", "documents", "pack_batch",
                 "BatchStream", "Mask", "attention_pairs", "mask_matrix", "attention_forward_flops"]:
        assert hasattr(fulcrum, name), name
    assert len(CASES) >= 40
