"""fulcrum.torch's kernel backends on one fused instruction, and the flash-attn call builder (no GPU needed)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="fulcrum.torch needs PyTorch (pip install .[torch])")

from fulcrum.torch.backend_fa2 import (  # noqa: E402
    BACKWARD_PARAMETERS,
    FORWARD_PARAMETERS,
    AtenCpuKernels,
    AtenCudaKernels,
    Fa2Backend,
    require_fa2_torch,
    schema_mismatch,
)
from fulcrum.torch.backend_flash import FlashCall, flash_backward_arguments, flash_layout, window_rows  # noqa: E402
from fulcrum.torch.backend_fulcrum import FulcrumBackend, kernel_tasks, numpy_view  # noqa: E402
from fulcrum.torch.backend_torch import TorchBackend  # noqa: E402
from fulcrum.torch.backend_triton import TritonBackend  # noqa: E402
from fulcrum.torch.backends import select_backend  # noqa: E402
from fulcrum.torch.program import Attention, AttentionBackward, Document, Item, ParsedPlan  # noqa: E402

import fulcrum  # noqa: E402

Q_HEADS, KV_HEADS, DIM = 4, 2, 8


def doc(length: int, mask: str, head_masks: tuple[str, ...] = ()) -> Document:
    return Document(length, fulcrum.Mask(mask), tuple(fulcrum.Mask(m) for m in head_masks))


def plan_of(documents: tuple[Document, ...]) -> ParsedPlan:
    return ParsedPlan("forward", "test", "pingpong", Q_HEADS, KV_HEADS, DIM, 4, documents, ())


# Buffers 0..4: q, k, v, o, lse; backward adds d_o, dq, dk, dv (5..8).
DOCS = (doc(100, "causal"), doc(64, "lambda:3:9", ("causal", "full", "window:5", "lambda:2:4")))
ITEMS = (
    Item(0, ((0, 0, 40), (40, 80, 20)), (0, 0, 100), None),  # head + tail of doc 0 against all its keys
    Item(1, ((60, 10, 30),), (100, 0, 40), (0, 2)),  # doc 1, heads 0-1 (causal, full) ...
    Item(1, ((60, 10, 30),), (100, 0, 40), (2, 4)),  # ... and heads 2-3 (window, lambda) of the same rows
    Item(1, ((90, 0, 14),), (140, 20, 34), None),  # keys after the rows: only the full head sees any
)


def random_buffers(seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    q, d_o = (torch.randn(104, Q_HEADS, DIM, generator=g) for _ in range(2))
    k, v = (torch.randn(174, KV_HEADS, DIM, generator=g) for _ in range(2))
    return [q, k, v, torch.zeros_like(q), torch.full((104, Q_HEADS), -torch.inf), d_o, torch.zeros_like(q),
            torch.zeros_like(k), torch.zeros_like(v)]


@pytest.mark.parametrize("backend", [FulcrumBackend(), TorchBackend(), Fa2Backend(), TritonBackend()],
                         ids=lambda b: b.name)
def test_backends_match_the_fp64_reference_with_head_ranges_and_per_head_masks(backend):
    plan = plan_of(DOCS)
    b = random_buffers(7)
    backend.forward(plan, Attention(0, 1, 2, 3, 4, ITEMS), b, 0.3)
    backend.backward(plan, AttentionBackward(0, 1, 2, 3, 4, 5, 6, 7, 8, ITEMS), b, 0.3)
    tasks = kernel_tasks(plan, ITEMS)
    ref = fulcrum.reference_attention(tasks, b[0].numpy(), b[1].numpy(), b[2].numpy(), d_o=b[5].numpy(), scale=0.3)
    # fp32 kernels against fp64 on O(1) values; rows no key sees: O = 0, LSE = -inf in both.
    assert np.isneginf(ref["lse"][90:, [0, 2, 3]]).all() and np.isfinite(ref["lse"][90:, 1]).all()
    np.testing.assert_allclose(b[4].numpy(), ref["lse"], atol=2e-5)
    for got, name in ((b[3], "o"), (b[6], "dq"), (b[7], "dk"), (b[8], "dv")):
        np.testing.assert_allclose(got.numpy(), ref[name], atol=2e-5, err_msg=name)


@pytest.mark.parametrize("backend", [FulcrumBackend(), TorchBackend(), Fa2Backend(), TritonBackend()],
                         ids=lambda b: b.name)
@pytest.mark.parametrize("where, value", [("q", np.nan), ("k", np.nan), ("v", np.nan), ("v", np.inf)])
def test_backends_propagate_non_finite_inputs_as_the_fp64_reference(backend, where, value):
    # One element of row 30 (doc 0, causal: rows 30-99 see key 30, the other 30 rows do not; GQA: kv head 1
    # feeds q heads 2 and 3). The torch backend once gave a NaN q row a finite O, no NaN row for a NaN key, and
    # NaN to 40 rows of which the mask lets 35 see a NaN value.
    plan = plan_of(DOCS)
    b = random_buffers(11)
    b[{"q": 0, "k": 1, "v": 2}[where]][30, 1, 3] = value
    backend.forward(plan, Attention(0, 1, 2, 3, 4, ITEMS), b, 0.3)
    ref = fulcrum.reference_attention(kernel_tasks(plan, ITEMS), b[0].numpy(), b[1].numpy(), b[2].numpy(), scale=0.3)
    # O: exactly the (row, head)s whose reference O is not finite are not finite (a kernel may spread the value
    # over the row's dims). LSE: NaN or +inf wherever the reference's is, and elsewhere only on those rows (a
    # kernel may poison the LSE of a row it poisons anyway); -inf is a row that sees no key. All else equal.
    o, lse = b[3].numpy(), b[4].numpy()
    rows = ~np.isfinite(ref["o"]).all(-1)
    assert rows.any()
    np.testing.assert_array_equal(~np.isfinite(o).all(-1), rows, err_msg="O: the (row, head)s the value reaches")
    lse_bad, ref_lse_bad = np.isnan(lse) | np.isposinf(lse), np.isnan(ref["lse"]) | np.isposinf(ref["lse"])
    assert (lse_bad >= ref_lse_bad).all() and (lse_bad <= (ref_lse_bad | rows)).all(), "LSE: NaN where"
    np.testing.assert_allclose(o[~rows], ref["o"][~rows], atol=2e-5)
    np.testing.assert_allclose(lse[~lse_bad], ref["lse"][~lse_bad], atol=2e-5)


def test_numpy_views_are_the_tensors_memory():
    t = torch.zeros(6, 2, 4)
    view = numpy_view(t)
    view[1, 0, 0] = 5
    assert t[1, 0, 0] == 5 and view.__array_interface__["data"][0] == t.data_ptr()
    bf16 = torch.ones(3, 2, 4, dtype=torch.bfloat16)
    bits = numpy_view(bf16)
    assert bits.dtype == np.uint16 and bits[0, 0, 0] == 0x3F80
    assert bits.__array_interface__["data"][0] == bf16.data_ptr()
    with pytest.raises(fulcrum.Error, match="has no NumPy view"):
        numpy_view(t.transpose(0, 1))


def test_flash_layout_batches_what_fa2_can_mask_one_call_per_window_and_falls_back_for_the_rest():
    docs = (doc(100, "causal"), doc(64, "window:8"), doc(32, "causal", ("causal",) * Q_HEADS))
    items = (
        Item(0, ((0, 0, 50),), (0, 0, 50), None),  # causal, keys end where queries end: causal sequence
        Item(0, ((50, 60, 20),), (50, 0, 40), None),  # keys before every query: fully visible
        Item(0, ((70, 0, 10), (80, 90, 10)), (90, 0, 10), None),  # head span causal, tail span fully visible
        Item(0, ((0, 0, 50),), (0, 0, 50), (0, 2)),  # a head range: FA2 computes all heads
        Item(1, ((100, 32, 16),), (100, 32, 16), None),  # a window band: FA2's window (7, 0)
        Item(1, ((116, 40, 4),), (116, 37, 4), None),  # fully visible under the window
        Item(2, ((120, 0, 8),), (120, 0, 8), None),  # per-head masks
        Item(0, ((0, 10, 10),), (0, 0, 30), None),  # causal with keys past the queries' end
        Item(0, ((0, 10, 10),), (0, 0, 0), None),  # no keys
        Item(0, ((124, 20, 10),), (124, 0, 25), None),  # causal, keys end 5 before the queries: window (-1, 5)
        Item(1, ((134, 20, 4),), (134, 12, 8), None),  # window keys end 4 early: (3, 4); row 23 sees 16..19
        Item(1, ((138, 30, 4),), (138, 0, 8), None),  # every row's window is past these keys: no key, falls back
    )
    layout = flash_layout(docs, items)
    assert layout.fallback == (3, 6, 7, 8, 11)
    full, causal, wider_causal, window_4, window = layout.calls
    assert [c.window for c in layout.calls] == [(-1, -1), (-1, 0), (-1, 5), (3, 4), (7, 0)]
    assert causal.causal and not full.causal and not window.causal
    assert causal.q_spans == ((0, 50), (70, 10)) and causal.k_spans == ((0, 50), (90, 10))
    assert causal.cu_seqlens_q == (0, 50, 60) and causal.cu_seqlens_k == (0, 50, 60)
    assert (causal.max_seqlen_q, causal.max_seqlen_k) == (50, 50)
    assert full.q_spans == ((50, 20), (80, 10), (116, 4)) and full.k_spans == ((50, 40), (90, 10), (116, 4))
    assert full.cu_seqlens_q == (0, 20, 30, 34) and full.cu_seqlens_k == (0, 40, 50, 54)
    assert (full.max_seqlen_q, full.max_seqlen_k) == (20, 40)
    assert window.q_spans == ((100, 16),) and wider_causal.k_spans == ((124, 25),) and window_4.q_spans == ((134, 4),)
    assert flash_layout(docs, items[3:4] + items[6:7]).calls == ()


@pytest.mark.parametrize("window", [(-1, 0), (-1, 4), (2, 3), (5, 0), (-1, -1)])
def test_fa2_cpu_calls_match_fp64_under_every_window_with_gqa_and_more_keys_than_queries(window):
    """AtenCpuKernels keeps FA2's varlen contract: GQA, windows aligned bottom-right (row i of nq sees keys
    i + nk - nq - left .. i + nk - nq + right), LSE [heads, total_q] out, gradients from O and LSE as inputs."""
    g = torch.Generator().manual_seed(3)
    # Sequence 0: 6 queries against 10 keys; sequence 1: 5 against 5.
    call = FlashCall(window, ((0, 6), (6, 5)), ((0, 10), (10, 5)), (0, 6, 11), (0, 10, 15), 6, 10)
    q, d_o = (torch.randn(11, Q_HEADS, DIM, generator=g, dtype=torch.float64) for _ in range(2))
    k, v = (torch.randn(15, KV_HEADS, DIM, generator=g, dtype=torch.float64) for _ in range(2))
    kernels = AtenCpuKernels()
    cu_q, cu_k = torch.tensor(call.cu_seqlens_q), torch.tensor(call.cu_seqlens_k)
    f32 = [t.float() for t in (q, k, v, d_o)]
    o, lse = kernels.forward(*f32[:3], call, cu_q, cu_k, 0.4)
    dq, dk, dv = kernels.backward(f32[3], *f32[:3], o, lse, call, cu_q, cu_k, 0.4)
    # fp64 reference by autograd on masks written from the rule, row by row.
    qr, kr, vr = (t.clone().requires_grad_() for t in (q, k, v))
    outs, lses = [], []
    for (q0, n_q), (k0, n_k) in zip(call.q_spans, call.k_spans, strict=True):
        visible = torch.tensor([[(window[0] < 0 or j >= i + n_k - n_q - window[0]) and
                                 (window[1] < 0 or j <= i + n_k - n_q + window[1]) for j in range(n_k)]
                                for i in range(n_q)])
        assert visible.sum(1).min() >= 1
        kh = kr[k0:k0 + n_k].repeat_interleave(Q_HEADS // KV_HEADS, dim=1)
        vh = vr[k0:k0 + n_k].repeat_interleave(Q_HEADS // KV_HEADS, dim=1)
        s = torch.einsum("qhd,khd->hqk", qr[q0:q0 + n_q], kh) * 0.4
        s = s.masked_fill(~visible, -torch.inf)
        lses.append(torch.logsumexp(s, -1))
        outs.append(torch.einsum("hqk,khd->qhd", torch.softmax(s, -1), vh))
    ref_o = torch.cat(outs)
    torch.autograd.backward(ref_o, d_o)
    assert lse.shape == (Q_HEADS, 11) and lse.dtype == torch.float32
    torch.testing.assert_close(lse.double(), torch.cat(lses, 1), atol=1e-5, rtol=0)
    for got, want, name in ((o, ref_o, "o"), (dq, qr.grad, "dq"), (dk, kr.grad, "dk"), (dv, vr.grad, "dv")):
        torch.testing.assert_close(got.double(), want.detach(), atol=2e-5, rtol=0, msg=name)


def test_window_rows_counts_fa2s_band():
    assert list(window_rows((-1, 0), 3, 5)) == [3, 4, 5]
    assert list(window_rows((1, 0), 3, 5)) == [2, 2, 2]
    assert list(window_rows((-1, -1), 2, 4)) == [4, 4] and list(window_rows((0, -1), 2, 4)) == [2, 1]


def test_flash_backward_arguments_follow_the_installed_signature():
    common = ["dout", "q", "k", "v", "out", "softmax_lse", "dq", "dk", "dv", "cu_seqlens_q", "cu_seqlens_k",
              "max_seqlen_q", "max_seqlen_k", "dropout_p", "softmax_scale", "causal"]
    values = {name: name.upper() for name in common[:13]} | {"softmax_scale": 0.5, "causal": True}
    v25 = flash_backward_arguments([*common, "window_size", "alibi_slopes", "deterministic", "rng_state"], values)
    assert v25["window_size"] == (-1, -1) and v25["dropout_p"] == 0.0 and v25["causal"] is True
    assert v25["q"] == "Q" and v25["rng_state"] is None and "softcap" not in v25
    v26 = flash_backward_arguments(
        [*common, "window_size_left", "window_size_right", "softcap", "alibi_slopes", "deterministic", "rng_state",
         "zero_tensors"], values)
    assert (v26["window_size_left"], v26["window_size_right"], v26["softcap"]) == (-1, -1, 0.0)
    assert list(v26) == [*common, "window_size_left", "window_size_right", "softcap", "alibi_slopes",
                         "deterministic", "rng_state", "zero_tensors"]
    with pytest.raises(fulcrum.Error, match="parameters \\['sink_tokens'\\]"):
        flash_backward_arguments([*common, "sink_tokens"], values)


def test_fa2_refuses_what_it_cannot_run_naming_the_backend_that_can():
    with pytest.raises(fulcrum.InputError, match=r"needs torch >= 2\.7.*this is torch 2\.6\.0.*backend=.torch."):
        require_fa2_torch("2.6.0+cu124")
    require_fa2_torch("2.11.0+cu130")
    with pytest.raises(fulcrum.InputError, match=r"runs bf16 and fp16 on CUDA, these are torch\.float32.*.torch."):
        select_backend("fa2", torch.device("cuda"), torch.float32)
    assert select_backend("fa2", torch.device("cuda"), torch.bfloat16).name == "fa2"
    assert select_backend("auto", torch.device("cpu"), torch.float32).name == "fulcrum"
    with pytest.raises(fulcrum.InputError, match=r"head_dim = 12: FlashAttention-2 runs multiples of 8 up to 256"):
        AtenCudaKernels().forward(*(torch.zeros(4, 2, 12) for _ in "qkv"), None, None, None, 1.0)  # type: ignore


def test_fa2_refuses_a_gpu_older_than_ampere(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (7, 5))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Tesla T4")
    with pytest.raises(fulcrum.InputError, match=r"compute capability >= 8\.0 .*Tesla T4 is 7\.5 \(use 'torch'\)"):
        select_backend("fa2", torch.device("cuda", 0), torch.bfloat16)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    assert select_backend("fa2", torch.device("cuda", 0), torch.bfloat16).name == "fa2"


def test_fa2_schemas_of_the_installed_torch_take_what_the_backend_passes():
    for op, expected in ((torch.ops.aten._flash_attention_forward.default, FORWARD_PARAMETERS),
                         (torch.ops.aten._flash_attention_backward.default, BACKWARD_PARAMETERS)):
        assert schema_mismatch([a.name for a in op._schema.arguments], expected) is None, op._schema
    # torch 2.7's backward named the RNG tensors philox_seed and philox_offset: any names pass there.
    assert schema_mismatch(["grad_out", "query"], BACKWARD_PARAMETERS) is not None
    assert "parameter 1 is 'q'" in str(schema_mismatch(["query", "q", *"abcdefghi"], FORWARD_PARAMETERS))


def test_auto_picks_per_device_and_dtype_and_says_once_when_cuda_half_precision_falls_to_torch(monkeypatch):
    import fulcrum.torch.backends as backends

    assert select_backend("auto", torch.device("cpu"), torch.float32).name == "fulcrum"
    assert select_backend("auto", torch.device("cpu"), torch.bfloat16).name == "fulcrum"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert select_backend("auto", torch.device("cuda"), torch.bfloat16).name == "fa2"
        assert select_backend("auto", torch.device("cuda"), torch.float16).name == "fa2"
        assert select_backend("auto", torch.device("cuda"), torch.float32).name == "torch"  # the fp32 fallback
    monkeypatch.setattr(backends, "_warned_torch_on_cuda", False)
    monkeypatch.setattr(backends, "fa2_runs", lambda device: False)  # e.g. torch 2.6, or a T4
    with pytest.warns(RuntimeWarning, match="because 'fa2' cannot run here"):
        assert select_backend("auto", torch.device("cuda"), torch.bfloat16).name == "torch"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a second pick says nothing, nor does fp32 (the torch backend's own dtype)
        assert select_backend("auto", torch.device("cuda"), torch.float16).name == "torch"
        monkeypatch.setattr(backends, "_warned_torch_on_cuda", False)
        assert select_backend("auto", torch.device("cuda"), torch.float32).name == "torch"


def test_fa2_builds_its_index_tensors_once_per_plan_not_per_step():
    plan = plan_of((doc(64, "causal"),))
    op = Attention(0, 1, 2, 3, 4, (Item(0, ((0, 0, 64),), (0, 0, 64), None),))
    g = torch.Generator().manual_seed(1)
    q, k, v = torch.randn(64, Q_HEADS, DIM, generator=g), *(torch.randn(64, KV_HEADS, DIM, generator=g) for _ in "kv")
    buffers = [q, k, v, torch.zeros_like(q), torch.full((64, Q_HEADS), -torch.inf)]
    backend = Fa2Backend()
    backend.forward(plan, op, buffers, 0.3)
    gathers = {key: value for key, value in plan.kernel_cache.items() if key[0] == "flash-gather"}
    assert len(gathers) == 1
    first_o = buffers[3].clone()
    backend.forward(plan, op, buffers, 0.3)
    again = {key: value for key, value in plan.kernel_cache.items() if key[0] == "flash-gather"}
    assert again.keys() == gathers.keys()
    assert all(a is b for key in gathers for a, b in zip(gathers[key], again[key], strict=True))
    assert torch.equal(buffers[3], first_o)


def test_fa2_runs_lambda_as_sink_and_window_pieces_merged_by_lse_and_matches_fp64():
    """lambda:4:8 over a whole document: rows 0-3 causal over the sink, rows 4-63 the sink in full plus the
    window over the rest, two calls merged by LSE; a span of rows past the sink with all their keys; a DCP-like
    block whose keys hold no sink key (one window). Forward and backward against the fp64 reference."""
    plan = plan_of((doc(64, "lambda:4:8"),))
    items = (Item(0, ((0, 0, 64),), (0, 0, 64), None), Item(0, ((64, 20, 10),), (64, 0, 30), None),
             Item(0, ((74, 32, 16),), (94, 16, 32), None))
    layout = flash_layout(plan.documents, items)
    assert layout.fallback == () and layout.merges
    by_window = {c.window: c for c in layout.calls}
    assert set(by_window) == {(-1, -1), (-1, 0), (7, 0)}
    assert by_window[(-1, 0)].q_spans == ((0, 4),) and by_window[(-1, 0)].k_spans == ((0, 4),)
    assert by_window[(-1, -1)].q_spans == ((4, 60), (64, 10)) and by_window[(-1, -1)].k_spans == ((0, 4), (64, 4))
    assert by_window[(7, 0)].q_spans == ((4, 60), (64, 10), (74, 16))
    assert by_window[(7, 0)].k_spans == ((4, 60), (68, 26), (94, 32))
    g = torch.Generator().manual_seed(5)
    q, d_o = (torch.randn(90, Q_HEADS, DIM, generator=g) for _ in range(2))
    k, v = (torch.randn(126, KV_HEADS, DIM, generator=g) for _ in range(2))
    b = [q, k, v, torch.zeros_like(q), torch.full((90, Q_HEADS), -torch.inf), d_o, torch.zeros_like(q),
         torch.zeros_like(k), torch.zeros_like(v)]
    backend = Fa2Backend()
    backend.forward(plan, Attention(0, 1, 2, 3, 4, items), b, 0.3)
    backend.backward(plan, AttentionBackward(0, 1, 2, 3, 4, 5, 6, 7, 8, items), b, 0.3)
    ref = fulcrum.reference_attention(kernel_tasks(plan, items), q.numpy(), k.numpy(), v.numpy(), d_o=d_o.numpy(),
                                      scale=0.3)
    np.testing.assert_allclose(b[4].numpy(), ref["lse"], atol=2e-5)
    for got, name in ((b[3], "o"), (b[6], "dq"), (b[7], "dk"), (b[8], "dv")):
        np.testing.assert_allclose(got.numpy(), ref[name], atol=2e-5, err_msg=name)


@pytest.mark.parametrize("window", [(-1, -1), (-1, 0), (7, 0)])
def test_fa2_cuda_calls_run_the_installed_aten_ops_on_meta_tensors_with_the_shapes_the_backend_expects(window):
    """What AtenCudaKernels passes, in the installed torch's schemas, on device 'meta' (no GPU): the forward returns
    O like q and the LSE unpadded as [heads, total_q] fp32; the backward takes them and returns dQ, dK, dV shaped as
    q, k, v (GQA: 8 q heads over 2 kv heads), for a full, a causal and a sliding-window call."""
    call = FlashCall(window, ((0, 60), (60, 40)), ((0, 70), (70, 50)), (0, 60, 100), (0, 70, 120), 60, 70)
    q = torch.empty(100, 8, 64, device="meta", dtype=torch.bfloat16)
    k, v = (torch.empty(120, 2, 64, device="meta", dtype=torch.bfloat16) for _ in "kv")
    cu_q, cu_k = (torch.empty(3, dtype=torch.int32, device="meta") for _ in "qk")
    kernels = AtenCudaKernels()
    o, lse = kernels.forward(q, k, v, call, cu_q, cu_k, 0.125)
    assert (o.shape, o.dtype) == (q.shape, torch.bfloat16)
    assert (lse.shape, lse.dtype) == (torch.Size([8, 100]), torch.float32)
    grads = kernels.backward(torch.empty_like(q), q, k, v, o, lse, call, cu_q, cu_k, 0.125)
    assert [g.shape for g in grads] == [q.shape, k.shape, v.shape]
