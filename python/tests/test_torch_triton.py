"""Fulcrum's Triton kernels (backend "triton", and "fa2"'s items FlashAttention-2 cannot mask) against the fp64
reference, run by Triton's interpreter on CPU (conftest sets TRITON_INTERPRET=1; on a GPU machine the same
kernels compile). Every mask kind, vertical columns over several 64-column chunks, per-head masks mixing
kinds, head ranges, GQA, head+tail query spans, items sharing key rows, and one document's keys split over
two instructions merged by LSE (the ring rule: each part's backward from the merged O and LSE), forward and
backward, fp32 and bf16.

Tolerance per tensor: |error| <= TOLERANCE[dtype] * max(1, max |reference|). fp32: 2e-5 (seen: ~1e-6).
bf16: inputs rounded to bf16 and the reference computed on the rounded values; P is rounded to bf16 before
P V, O is stored in bf16, so 1e-2 (seen: ~4e-3), as test_torch_attention.py.
"""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="fulcrum.torch needs PyTorch (pip install .[torch])")
pytest.importorskip("triton", reason="the Triton kernels need triton (it comes with torch's Linux wheels)")

from fulcrum.torch.backend_fa2 import Fa2Backend  # noqa: E402
from fulcrum.torch.backend_flash import flash_layout  # noqa: E402
from fulcrum.torch.backend_fulcrum import kernel_tasks  # noqa: E402
from fulcrum.torch.backend_triton import TritonBackend, device_table, triton_runs  # noqa: E402
from fulcrum.torch.backends import select_backend  # noqa: E402
from fulcrum.torch.lse_merge import merge_by_lse  # noqa: E402
from fulcrum.torch.program import Attention, AttentionBackward, Document, Item, ParsedPlan  # noqa: E402
from test_kernels import MASK_EXAMPLES  # noqa: E402  (one mask of every kind; that file checks it is every kind)

import fulcrum  # noqa: E402

Q_HEADS, KV_HEADS, DIM = 4, 2, 24  # DIM: not a power of two, so the kernels' padded head dimension is tested
TOLERANCE = {torch.float32: 2e-5, torch.bfloat16: 1e-2}
LENGTH = 320  # a multiple of the striped mask's ranks x block


def columns(rng: random.Random, n: int) -> str:
    return ",".join(str(c) for c in sorted(rng.sample(range(LENGTH), n)))


def every_mask(seed: int) -> list[str]:
    """One mask of every kind, vertical-slash ones with more than 64 columns (several gathered chunks)."""
    rng = random.Random(seed)
    pairs = ",".join(f"{qb}-{kb}" for qb in range(LENGTH // 32) for kb in range(qb + 1)
                     if kb in (0, qb) or rng.random() < 0.3)
    masks = ["causal", "full", "window:37", "lambda:5:40", "blockwise:48:1", "shared-question:3:25",
             f"vslash:{columns(rng, 80)}:0,1,17,100", f"blocksparse:32:{pairs}",
             f"vsblocks:16:{columns(rng, 70)}:0,2,5", f"striped:2:16:vsblocks:16:{columns(rng, 40)}:0,1"]
    assert {fulcrum.Mask(m).kind for m in masks} == {fulcrum.Mask(m).kind for m in MASK_EXAMPLES}
    return masks


def problem(mask: str, head_masks: tuple[str, ...], dtype: torch.dtype, seed: int):
    """Two documents (the second under ``mask`` or per-head masks) in one instruction: a head+tail item against
    all keys, the middle rows as two items over head ranges [0, 2) and [2, 4) sharing those keys, and a short
    document of 40 rows whose keys start after its first query rows."""
    docs = (Document(LENGTH, fulcrum.Mask(mask), tuple(fulcrum.Mask(m) for m in head_masks)),
            Document(40, fulcrum.Mask("causal" if mask.startswith("striped") else mask), ()))
    plan = ParsedPlan("forward", "test", "pingpong", Q_HEADS, KV_HEADS, DIM, 4, docs, ())
    a, b = 70, 250
    items = (Item(0, ((0, 0, a), (b, b, LENGTH - b)), (0, 0, LENGTH), None),
             Item(0, ((a, a, b - a),), (0, 0, LENGTH), (0, 2)),
             Item(0, ((a, a, b - a),), (0, 0, LENGTH), (2, 4)),
             Item(1, ((LENGTH, 0, 40),), (LENGTH + 10, 10, 30), None))
    g = torch.Generator().manual_seed(seed)
    rows = LENGTH + 40

    def randn(heads: int) -> torch.Tensor:
        return torch.randn(rows, heads, DIM, generator=g).to(dtype)

    q, k, v, d_o = randn(Q_HEADS), randn(KV_HEADS), randn(KV_HEADS), randn(Q_HEADS)
    return plan, items, q, k, v, d_o


def buffers(q, k, v, d_o) -> list[torch.Tensor]:
    return [q, k, v, torch.zeros_like(q), torch.full(q.shape[:2], -torch.inf), d_o,
            *(torch.zeros(t.shape) for t in (q, k, v))]


def reference(plan, items, q, k, v, d_o) -> dict[str, np.ndarray]:
    return fulcrum.reference_attention(kernel_tasks(plan, items), *(t.float().numpy() for t in (q, k, v)),
                                       d_o=d_o.float().numpy(), scale=0.3)


def assert_close(got: dict[str, torch.Tensor], ref: dict[str, np.ndarray], dtype: torch.dtype, what: str) -> None:
    assert (np.isneginf(got["lse"].numpy()) == np.isneginf(ref["lse"])).all(), f"{what}: rows that see no key"
    for name, tensor in got.items():
        want = np.where(np.isneginf(ref[name]), 0.0, ref[name])
        value = np.where(np.isneginf(tensor.double().numpy()), 0.0, tensor.double().numpy())
        bound = TOLERANCE[dtype] * max(1.0, np.abs(want).max())
        error = np.abs(value - want).max()
        assert error <= bound, f"{what}: {name} |error| {error:.2e} > {bound:.2e}"


def run(backend, plan, items, b, scale=0.3) -> None:
    backend.forward(plan, Attention(0, 1, 2, 3, 4, items), b, scale)
    backend.backward(plan, AttentionBackward(0, 1, 2, 3, 4, 5, 6, 7, 8, items), b, scale)


MASKS = every_mask(1)
DTYPES = (torch.float32, torch.bfloat16)


def test_the_kernels_are_interpreted_on_cpu_here():
    """CI has no GPU: the kernels must run (interpreted), or every test below would test nothing."""
    assert triton_runs(torch.device("cpu"), torch.float32)
    assert select_backend("triton", torch.device("cpu"), torch.bfloat16).name == "triton"


# fp32 for every kind; bf16 (twice the interpreter's time) for the dense and striped kernels' paths here, and
# for the column and block paths (vslash, blocksparse, vsblocks) in the per-head test below.
KIND_CASES = [(m, torch.float32) for m in MASKS] + [(m, torch.bfloat16) for m in (MASKS[0], MASKS[9])]


@pytest.mark.parametrize(("mask", "dtype"), KIND_CASES, ids=lambda x: x.split(":")[0] if isinstance(x, str) else str(x))
def test_triton_matches_fp64_under_every_mask_kind(mask, dtype):
    plan, items, q, k, v, d_o = problem(mask, (), dtype, seed=len(mask))
    b = buffers(q, k, v, d_o)
    run(TritonBackend(), plan, items, b)
    got = {"o": b[3], "lse": b[4], "dq": b[6], "dk": b[7], "dv": b[8]}
    assert_close(got, reference(plan, items, q, k, v, d_o), dtype, mask)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_triton_matches_fp64_with_per_head_masks_of_mixed_kinds(dtype):
    heads = (MASKS[6], MASKS[7], "window:37", MASKS[8])  # vslash, blocksparse, window, vsblocks
    plan, items, q, k, v, d_o = problem("causal", heads, dtype, seed=3)
    b = buffers(q, k, v, d_o)
    run(TritonBackend(), plan, items, b)
    got = {"o": b[3], "lse": b[4], "dq": b[6], "dk": b[7], "dv": b[8]}
    assert_close(got, reference(plan, items, q, k, v, d_o), dtype, "per-head masks")


@pytest.mark.parametrize("mask", [MASKS[0], MASKS[6], MASKS[9]], ids=lambda m: m.split(":")[0])
def test_keys_split_over_two_instructions_merge_by_lse_into_whole_attention(mask):
    """Rows [a, b) of the document against keys [0, 150) and [150, 320) in two instructions, merged by LSE;
    backward runs each part from the merged O and LSE, and the parts' gradients add up to the whole's."""
    plan, _, q, k, v, d_o = problem(mask, (), torch.float32, seed=11)
    parts = [(Item(0, ((0, 0, LENGTH),), (0, 0, 150), None),), (Item(0, ((0, 0, LENGTH),), (150, 150, 170), None),)]
    backend = TritonBackend()
    outs = [buffers(q, k, v, d_o) for _ in parts]
    for items, b in zip(parts, outs, strict=True):
        backend.forward(plan, Attention(0, 1, 2, 3, 4, items), b, 0.3)
    merged_o, merged_lse = merge_by_lse(torch.stack([b[3] for b in outs]), torch.stack([b[4] for b in outs]))
    for items, b in zip(parts, outs, strict=True):
        b[3].copy_(merged_o)
        b[4].copy_(merged_lse)
        backend.backward(plan, AttentionBackward(0, 1, 2, 3, 4, 5, 6, 7, 8, items), b, 0.3)
    whole = (Item(0, ((0, 0, LENGTH),), (0, 0, LENGTH), None),)
    grads = {n: outs[0][i] + outs[1][i] for n, i in (("dq", 6), ("dk", 7), ("dv", 8))}
    got = {"o": merged_o, "lse": merged_lse, **grads}
    ref = reference(plan, whole, q, k, v, d_o)
    rows = slice(0, LENGTH)
    assert_close({n: t[rows] for n, t in got.items()}, {n: r[rows] for n, r in ref.items()}, torch.float32, mask)


@pytest.mark.parametrize("mask", ["lambda:5:40", MASKS[7]], ids=["lambda", "blocksparse"])
def test_fa2_runs_what_it_cannot_mask_on_the_triton_kernels_in_the_same_instruction(mask):
    plan, items, q, k, v, d_o = problem(mask, (), torch.float32, seed=5)
    layout = flash_layout(plan.documents, items)
    assert layout.fallback, "some items must fall back, or this tests nothing"
    b = buffers(q, k, v, d_o)
    run(Fa2Backend(fallback=TritonBackend()), plan, items, b)  # on CUDA it is the default; on CPU torch is
    assert any(key[0] == "triton" for key in plan.kernel_cache), "the fallback items ran on the Triton kernels"
    got = {"o": b[3], "lse": b[4], "dq": b[6], "dk": b[7], "dv": b[8]}
    assert_close(got, reference(plan, items, q, k, v, d_o), torch.float32, mask)


def test_the_block_table_is_built_once_per_plan_kept_on_the_device_and_holds_every_visible_pair():
    heads = (MASKS[6], MASKS[7], "window:37", MASKS[8])
    plan, items, q, k, v, d_o = problem("causal", heads, torch.float32, seed=2)
    first = device_table(plan, items, q, k)
    assert device_table(plan, items, q, k) is first
    run(TritonBackend(), plan, items, buffers(q, k, v, d_o))
    assert [key for key in plan.kernel_cache if key[0] == "triton"] == [("triton", tuple(map(id, items)), "cpu")]
    visible = 0
    for item in items:
        doc = plan.documents[item.doc]
        for head in range(*(item.heads or (0, Q_HEADS))):
            mask = doc.head_masks[head] if doc.head_masks else doc.mask
            spans = [(position, position + count) for _, position, count in item.queries]
            visible += fulcrum.attention_pairs(mask, spans, (item.keys[1], item.keys[1] + item.keys[2]), doc.length)
    table = fulcrum._core.block_table(kernel_tasks(plan, items), Q_HEADS, q.shape[0], k.shape[0])
    with pytest.raises(fulcrum.InputError, match=r"tasks\[3\]\.keys: rows .* leave the K/V buffer"):
        fulcrum._core.block_table(kernel_tasks(plan, items), Q_HEADS, q.shape[0], LENGTH)
    assert table["pairs"] == visible and first.tiles == len(table["tile_row"])


def test_the_kernels_compile_for_ampere_and_hopper_gpus_without_one():
    """The interpreter checks the kernels' arithmetic, not that Triton compiles them for a GPU: this compiles all
    four (Triton's front end, then ptxas) for compute capability 8.0 (A100) and 9.0 (H100/H200), bf16 and fp16,
    head_dim 128 under GQA groups of 4 and 64 without, in a process where the kernels are not interpreted. Shared
    memory must fit 99 KiB per block (the smallest Ampere/Hopper limit, sm_86/89's)."""
    script = ("import torch, json\n"
              "from fulcrum.torch.backend_triton import compile_kernels\n"
              "print(json.dumps({f'{arch} {d} {dim}': compile_kernels(arch, dtype, dim, group) for arch in (80, 90)\n"
              "    for d, dtype, dim, group in (('bf16', torch.bfloat16, 128, 4), ('fp16', torch.float16, 64, 1))}))")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    shared = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(shared) == 4 and all(len(kernels) == 4 for kernels in shared.values()), shared
    worst = max(b for kernels in shared.values() for b in kernels.values())
    assert 0 < worst <= 99 * 1024, shared
