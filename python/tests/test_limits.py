"""The supported limits (docs/cli.md) at the Python boundary: beyond them an InputError naming the field,
never a crash or a wrapped count; up to them exact answers."""
import pytest

import fulcrum

LARGEST_DOCUMENT = 2**30


def test_pair_counts_beyond_the_largest_document_are_refused_not_wrapped():
    # 2**33 tokens: 2**33 * (2**33 + 1) / 2 pairs do not fit 64 bits (it returned 4294967296).
    with pytest.raises(fulcrum.InputError, match=r"^doc_len: document length = 8589934592: must be <= 1073741824"):
        fulcrum.attention_pairs("causal", [(0, 2**33)], (0, 2**33), 2**33)
    n = LARGEST_DOCUMENT  # Python's integers are the exact reference
    assert fulcrum.attention_pairs("causal", [(0, n)], (0, n), n) == n * (n + 1) // 2
    assert fulcrum.attention_pairs("full", [(0, n)], (0, n), n) == n * n


def test_documents_and_batches_beyond_the_limits_are_refused_by_name():
    with pytest.raises(fulcrum.InputError, match="document 0: document length = 4294967296"):
        fulcrum.pack_batch(fulcrum.documents([2**32]), 4, 2**30)
    with pytest.raises(fulcrum.InputError, match="tokens-per-rank = 4611686018427387904: must be <= 1073741824"):
        fulcrum.pack_batch(fulcrum.documents([100]), 4, 2**62)
    with pytest.raises(fulcrum.InputError, match="ranks = 65537: must be <= 65536"):
        fulcrum.BatchStream(fulcrum.make_length_source("uniform:1:10"), 65537, 16)


def test_pack_batch_drops_nothing():
    # Ten 70,000-token documents into 4 x 4096 tokens: an error naming the first one cut, not one of ten.
    with pytest.raises(fulcrum.InputError, match="document 0 would be cut at token 16384"):
        fulcrum.pack_batch(fulcrum.documents([70000] * 10), 4, 4096)


def test_batch_stream_without_a_source_is_an_input_error():
    with pytest.raises(fulcrum.InputError, match=r"^source = None: must be a LengthSource"):
        fulcrum.BatchStream(None, 4, 4096)


def test_simulate_training_rejects_a_layout_whose_gpu_count_overflows():
    # tp x pp = 8 x 2**29 wrapped to 0 in an int and divided by it: SIGFPE killed the interpreter.
    llama, h200 = fulcrum.model_shape("llama3-8b"), fulcrum.hardware("h200-dgx")
    with pytest.raises(fulcrum.InputError, match=r"^pp = 536870912: tp x pp = 4294967296 must divide gpus = 8$"):
        fulcrum.simulate_training("packed", llama, h200, gpus=8, tp=8, pp=536870912, max_doc_len=16384)
    with pytest.raises(fulcrum.InputError, match=r"^gpus = 65537: must be in \[1, 65536\]"):
        fulcrum.simulate_training("packed", llama, h200, gpus=65537, tp=1, max_doc_len=16384)
