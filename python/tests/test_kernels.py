import numpy as np
import pytest

import fulcrum

Q_HEADS, KV_HEADS, DIM = 4, 2, 32


def bf16_bits(x):
    """float32 -> bf16 bits (uint16), round to nearest even, as torch's .to(torch.bfloat16)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_value(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


@pytest.fixture
def case():
    """Two documents in shared buffers: a head+tail task over doc 0 (causal) and a windowed task."""
    rng = np.random.default_rng(5)
    q = rng.standard_normal((300, Q_HEADS, DIM), dtype=np.float32)
    k = rng.standard_normal((300, KV_HEADS, DIM), dtype=np.float32)
    v = rng.standard_normal((300, KV_HEADS, DIM), dtype=np.float32)
    tasks = [
        fulcrum.AttentionTask([(0, 0, 50), (50, 150, 50)], (0, 0, 200), 200, "causal"),
        fulcrum.AttentionTask([(200, 0, 100)], (200, 0, 100), 100, fulcrum.Mask("window:16")),
    ]
    return tasks, q, k, v


def test_forward_matches_the_fp64_reference_in_place(case):
    tasks, q, k, v = case
    o = np.zeros_like(q)
    lse = np.full((300, Q_HEADS), -np.inf, dtype=np.float32)
    o_out, lse_out = fulcrum.attention_forward(tasks, q, k, v, o=o, lse=lse)
    # Zero-copy: the results are the caller's arrays, written in place.
    assert o_out is o and lse_out is lse
    ref = fulcrum.reference_attention(tasks, q, k, v)
    named = np.r_[0:100, 200:300]  # rows 100..199 belong to no task: left untouched (O = 0, LSE = -inf)
    assert np.abs(o[named] - ref["o"][named]).max() < 1e-5 and np.abs(lse[named] - ref["lse"][named]).max() < 1e-5
    assert (o[100:200] == 0).all() and np.isneginf(lse[100:200]).all()
    assert tasks[0].queries[1] == (50, 150, 50) and tasks[1].doc_len == 100 and str(tasks[1].mask) == "window:16"


def test_inputs_are_read_in_place_not_copied(case):
    tasks, q, k, v = case
    # A view into a larger C-contiguous buffer is accepted as is: changing the buffer changes the result.
    store = np.zeros((2, *q.shape), dtype=np.float32)
    store[1] = q
    o1, _ = fulcrum.attention_forward(tasks, store[1], k, v)
    store[1] *= 2
    o2, _ = fulcrum.attention_forward(tasks, store[1], k, v)
    assert not np.allclose(o1, o2)
    o = np.zeros_like(q)
    before = o.__array_interface__["data"][0]
    out, _ = fulcrum.attention_forward(tasks, q, k, v, o=o)
    assert out.__array_interface__["data"][0] == before and np.shares_memory(out, o)


def test_bf16_storage_as_uint16(case):
    tasks, q, k, v = case
    qb, kb, vb = bf16_bits(q), bf16_bits(k), bf16_bits(v)
    o, lse = fulcrum.attention_forward(tasks, qb, kb, vb)
    assert o.dtype == np.uint16 and lse.dtype == np.float32
    ref = fulcrum.reference_attention(tasks, bf16_value(qb), bf16_value(kb), bf16_value(vb))
    # bf16 keeps 8 mantissa bits: the output's rounding alone is 2^-9 relative.
    assert np.abs(bf16_value(o) - ref["o"]).max() < 2e-2


def test_backward_matches_the_reference(case):
    tasks, q, k, v = case
    d_o = np.random.default_rng(6).standard_normal(q.shape, dtype=np.float32)
    o, lse = fulcrum.attention_forward(tasks, q, k, v)
    dq = np.zeros_like(q)
    dq_out, dk, dv = fulcrum.attention_backward(tasks, q, k, v, o, lse, d_o, dq=dq)
    assert dq_out is dq and dk.shape == k.shape and dv.dtype == np.float32
    ref = fulcrum.reference_attention(tasks, q, k, v, d_o=d_o)
    for name, got in [("dq", dq), ("dk", dk), ("dv", dv)]:
        assert np.abs(got - ref[name]).max() < 1e-4, name


def test_bad_arrays_raise_named_errors(case):
    tasks, q, k, v = case
    with pytest.raises(fulcrum.InputError, match=r"^q: dtype float64 is not float32"):
        fulcrum.attention_forward(tasks, q.astype(np.float64), k, v)
    with pytest.raises(fulcrum.InputError, match=r"^k: dtype float16 is not float32"):
        fulcrum.attention_forward(tasks, q, k.astype(np.float16), v)
    with pytest.raises(fulcrum.InputError, match=r"^v: not C-contiguous"):
        fulcrum.attention_forward(tasks, q, k, np.asfortranarray(v))
    with pytest.raises(fulcrum.InputError, match=r"^q: not C-contiguous"):
        fulcrum.attention_forward(tasks, np.zeros((300, Q_HEADS, 2 * DIM), np.float32)[:, :, ::2], k, v)
    readonly = np.zeros_like(q)
    readonly.flags.writeable = False
    with pytest.raises(fulcrum.InputError, match=r"^o: read-only"):
        fulcrum.attention_forward(tasks, q, k, v, o=readonly)
    with pytest.raises(fulcrum.InputError, match=r"^lse: 3 dimensions, want 2"):
        fulcrum.attention_forward(tasks, q, k, v, lse=np.zeros((300, Q_HEADS, 1), np.float32))
    with pytest.raises(fulcrum.InputError, match=r"^o: "):
        fulcrum.attention_forward(tasks, q, k, v, o=np.zeros((299, Q_HEADS, DIM), np.float32))
    # Validation inside the kernel: the C++ message, naming the task and the field.
    far = [fulcrum.AttentionTask([(0, 0, 10)], (295, 0, 10), 10)]
    with pytest.raises(fulcrum.InputError, match=r"tasks\[0\]\.keys"):
        fulcrum.attention_forward(far, q, k, v)
    with pytest.raises(fulcrum.InputError, match="queries: 3 spans"):
        fulcrum.AttentionTask([(0, 0, 1)] * 3, (0, 0, 1), 1)
