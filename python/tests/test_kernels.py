import os
import subprocess
import sys

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


def test_head_ranges_and_per_head_masks_match_the_reference(case):
    _, q, k, v = case
    head_masks = ["causal", "full", "window:7", "lambda:2:5"]
    # The same rows split over two tasks by heads, each head under its own mask; the masks live in the task.
    tasks = [fulcrum.AttentionTask([(0, 0, 120)], (0, 0, 120), 120, heads=(0, 1), head_masks=head_masks),
             fulcrum.AttentionTask([(0, 0, 120)], (0, 0, 120), 120, heads=(1, 4), head_masks=head_masks)]
    assert tasks[1].heads == (1, 4) and [str(m) for m in tasks[1].head_masks] == head_masks
    assert fulcrum.AttentionTask([(0, 0, 1)], (0, 0, 1), 1).heads is None
    d_o = np.random.default_rng(8).standard_normal(q.shape, dtype=np.float32)
    o, lse = fulcrum.attention_forward(tasks, q, k, v)
    dq, dk, dv = fulcrum.attention_backward(tasks, q, k, v, o, lse, d_o)
    ref = fulcrum.reference_attention(tasks, q, k, v, d_o=d_o)
    rows = slice(0, 120)
    # Heads see different keys, so their outputs differ from the all-causal result.
    causal, _ = fulcrum.attention_forward([fulcrum.AttentionTask([(0, 0, 120)], (0, 0, 120), 120)], q, k, v)
    assert np.abs(o[rows, 1] - causal[rows, 1]).max() > 1e-2
    for name, got in [("o", o), ("lse", lse), ("dq", dq), ("dk", dk), ("dv", dv)]:
        assert np.abs(got[rows] - ref[name][rows]).max() < 1e-4, name
    with pytest.raises(fulcrum.InputError, match=r"heads = \(2, 2\): must satisfy 0 <= begin < end"):
        fulcrum.AttentionTask([(0, 0, 1)], (0, 0, 1), 1, heads=(2, 2))
    with pytest.raises(fulcrum.InputError, match=r"tasks\[0\]\.heads"):
        fulcrum.attention_forward([fulcrum.AttentionTask([(0, 0, 9)], (0, 0, 9), 9, heads=(3, 5))], q, k, v)


# One example per mask kind (the C++ kind table's examples); the test below checks none is missing.
MASK_EXAMPLES = ["causal", "full", "window:5", "lambda:2:4", "blockwise:3:1", "shared-question:3:25", "vslash:0,7:0,2",
                 "blocksparse:4:0-0,1-0,2-1,2-2,4-4", "vsblocks:4:0,9:0,2", "striped:1:1:vsblocks:2:5:0,3"]


def test_mask_examples_cover_every_kind():
    kinds = {fulcrum.Mask(spec).kind for spec in MASK_EXAMPLES}
    for name in fulcrum.planner_names():
        planner = fulcrum.make_planner(name, fulcrum.PlannerOptions(fulcrum.model_shape("tiny")))
        assert set(planner.capabilities.masks) <= kinds


@pytest.mark.parametrize("spec", MASK_EXAMPLES)
def test_mask_matrix_counts_the_pairs_the_cost_model_counts(spec):
    # Two independent C++ answers: the matrix is built from the kernels' row_bits, pair counts are closed forms.
    rng = np.random.default_rng(len(spec))
    for _ in range(30):
        n = int(rng.integers(1, 90))
        a, b = sorted(rng.integers(0, n + 1, 2))
        c, d = sorted(rng.integers(0, n + 1, 2))
        e, f = sorted(rng.integers(0, n + 1, 2))
        m = fulcrum.mask_matrix(spec, [(a, b), (e, f)], (c, d), n)
        assert m.shape == (b - a + f - e, d - c) and m.dtype == np.bool_
        pairs = fulcrum.attention_pairs(spec, [(a, b)], (c, d), n) + fulcrum.attention_pairs(spec, [(e, f)], (c, d), n)
        assert m.sum() == pairs, (n, a, b, c, d, e, f)


def test_mask_matrix_is_the_masks_definition():
    q, k = np.arange(20)[:, None], np.arange(20)[None, :]
    expected = {"causal": k <= q, "full": np.ones((20, 20), bool), "window:5": (k <= q) & (k > q - 5),
                "lambda:2:4": (k <= q) & ((k < 2) | (k > q - 4))}
    for spec, want in expected.items():
        np.testing.assert_array_equal(fulcrum.mask_matrix(spec, [(0, 20)], (0, 20), 20), want, err_msg=spec)
        np.testing.assert_array_equal(fulcrum.mask_matrix(spec, [(3, 9)], (2, 17), 20), want[3:9, 2:17], err_msg=spec)
    with pytest.raises(fulcrum.InputError, match=r"^keys = \[0, 21\): must satisfy 0 <= begin <= end <= doc_len = 20"):
        fulcrum.mask_matrix("causal", [(0, 20)], (0, 21), 20)
    with pytest.raises(fulcrum.InputError, match=r"^queries\[1\] = \[5, 4\)"):
        fulcrum.mask_matrix("causal", [(0, 1), (5, 4)], (0, 20), 20)


def test_vsblocks_matrix_is_its_definition():
    q, k = np.arange(40)[:, None], np.arange(40)[None, :]
    want = (k <= q) & (np.isin(q // 8 - k // 8, [0, 3]) | np.isin(k, [2, 30]))
    mask = fulcrum.Mask.vertical_slash_blocks(8, [30, 2], [3, 0])
    assert str(mask) == "vsblocks:8:2,30:0,3"
    np.testing.assert_array_equal(fulcrum.mask_matrix(mask, [(0, 40)], (0, 40), 40), want)


@pytest.mark.parametrize("ranks,block", [(1, 5), (2, 1), (4, 3), (3, 8)])
@pytest.mark.parametrize("inner", ["causal", "vsblocks:4:1,17:0,2", "window:7"])
def test_striped_matrix_is_the_inner_matrix_permuted(inner, ranks, block):
    mask = fulcrum.Mask.striped(inner, ranks, block)
    n = 2 * ranks * block * 2
    assert mask.length_multiple == ranks * block
    source = np.array([mask.source_position(p, n) for p in range(n)])
    assert sorted(source) == list(range(n))
    assert [mask.slot_of(int(t), n) for t in source] == list(range(n))
    rank, local = np.divmod(np.arange(n), n // ranks)
    np.testing.assert_array_equal(source, ((local // block) * ranks + rank) * block + local % block)
    inner_matrix = fulcrum.mask_matrix(inner, [(0, n)], (0, n), n)
    got = fulcrum.mask_matrix(mask, [(0, n)], (0, n), n)
    np.testing.assert_array_equal(got, inner_matrix[np.ix_(source, source)])
    assert fulcrum.attention_pairs(mask, [(0, n)], (0, n), n) == inner_matrix.sum()


def test_striped_lengths_must_be_multiples_of_ranks_times_block():
    mask = fulcrum.Mask("striped:4:2:causal")
    with pytest.raises(fulcrum.InputError, match=r"^doc_len: mask striped = 'striped:4:2:causal': document length = 12 "
                                                 r"must be a multiple of ranks x block = 4 x 2 = 8"):
        fulcrum.mask_matrix(mask, [(0, 12)], (0, 12), 12)
    with pytest.raises(fulcrum.InputError, match=r"^slot = 16: must be in \[0, doc_len = 16\)"):
        mask.source_position(16, 16)
    with pytest.raises(fulcrum.InputError, match="mask striped"):
        fulcrum.attention_pairs(mask, [(0, 4)], (0, 4), 12)


def test_torch_cpu_tensors_are_used_in_place_and_come_back_as_tensors():
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(3)
    tasks = [fulcrum.AttentionTask([(0, 0, 96)], (0, 0, 96), 96, "causal")]
    q, d_o = (torch.randn(96, 4, 32, generator=g) for _ in range(2))
    k, v = (torch.randn(96, 2, 32, generator=g) for _ in range(2))
    o = torch.empty(96, 4, 32)
    o_out, lse = fulcrum.attention_forward(tasks, q, k, v, o=o)
    assert isinstance(o_out, torch.Tensor) and o_out.data_ptr() == o.data_ptr(), "o must be written in place"
    dq, dk, dv = fulcrum.attention_backward(tasks, q, k, v, o, lse, d_o)
    ref = fulcrum.reference_attention(tasks, q.numpy(), k.numpy(), v.numpy(), d_o.numpy())
    for name, got in (("o", o), ("lse", lse), ("dq", dq), ("dk", dk), ("dv", dv)):
        want = torch.from_numpy(ref[name])
        assert float((got.double() - want).abs().max()) <= 1e-5 * max(1.0, float(want.abs().max())), name
    # bf16 tensors: the kernels read their bit patterns; O comes back as bf16.
    o_bf16, _ = fulcrum.attention_forward(tasks, q.bfloat16(), k.bfloat16(), v.bfloat16())
    assert o_bf16.dtype == torch.bfloat16
    assert float((o_bf16.double() - torch.from_numpy(ref["o"])).abs().max()) < 2e-2


def test_tensors_off_the_cpu_are_refused_naming_the_argument():
    torch = pytest.importorskip("torch")
    tasks = [fulcrum.AttentionTask([(0, 0, 8)], (0, 0, 8), 8)]
    q = torch.zeros(8, 1, 16)
    with pytest.raises(fulcrum.InputError, match="k: a tensor on meta"):
        fulcrum.attention_forward(tasks, q, torch.zeros(8, 1, 16, device="meta"), q)


def cpu_flags():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return None


def test_simd_path_is_the_best_version_the_cpu_runs():
    """One build carries avx512, avx2 and baseline kernels; dispatch must pick the best the CPU has."""
    if os.environ.get("FULCRUM_SIMD"):
        pytest.skip("FULCRUM_SIMD chooses the version")
    path = fulcrum.simd_path()
    flags = cpu_flags()
    if flags is None:
        pytest.skip(f"no /proc/cpuinfo: {path}")
    best = "avx512" if "avx512f" in flags else "avx2" if {"avx2", "fma"} <= flags else "baseline"
    assert path.startswith(f"{best} (run-time dispatch; best on this CPU: {best})"), (path, best)


def test_fulcrum_simd_selects_a_version_and_refuses_one_the_cpu_lacks_or_does_not_know():
    """FULCRUM_SIMD picks the version at start-up; a bad value is a clear error on the first kernel call."""
    code = "import fulcrum; print(fulcrum.simd_path())"
    env = dict(os.environ, FULCRUM_SIMD="baseline")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.startswith("baseline (run-time dispatch"), out.stdout
    env["FULCRUM_SIMD"] = "sse4"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode != 0 and "FULCRUM_SIMD = 'sse4': expected avx512, avx2 or baseline" in out.stderr, out.stderr
