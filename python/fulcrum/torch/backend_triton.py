"""Kernel backend "triton": Fulcrum's block-sparse Triton kernels (triton_kernels.py) for every item of an
instruction, whatever its mask: CUDA bf16/fp16, or CPU tensors of any float dtype when Triton interprets
(``TRITON_INTERPRET=1``, how CI tests them). "fa2" runs the items FlashAttention-2 cannot mask here on CUDA.

The block table of an instruction's items is built once per plan on the host (``_core.block_table``: the
C++ masks decide each tile) and kept on the device with the plan, so a step after the first does no host
work for it: a forward is one kernel launch, a backward three (rowsum(dO * O), dQ, dK/dV).
"""
from __future__ import annotations

import importlib
import importlib.util
import os
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType

import numpy as np
import torch

from .. import _core
from .backend_fulcrum import kernel_tasks
from .item_backend import ItemBackend
from .program import Item, ParsedPlan

CUDA_DTYPES = (torch.bfloat16, torch.float16)
TABLE_FIELDS = ("tile_row", "tile_rows", "tile_head_begin", "tile_head_end", "tile_entries", "entry_tile",
                "entry_block", "entry_bits", "key_order", "block_entries", "block_row", "block_keys", "block_gather",
                "gather", "bits")


def _kernels() -> ModuleType:
    """The kernel module, imported on first use (importing Triton costs about a second)."""
    return importlib.import_module("fulcrum.torch.triton_kernels")


def triton_available() -> bool:
    return importlib.util.find_spec("triton") is not None


def triton_runs(device: torch.device, dtype: torch.dtype) -> bool:
    """Whether the Triton kernels can run tensors of ``dtype`` on ``device`` in this process."""
    if not triton_available():
        return False
    if device.type == "cuda":
        return dtype in CUDA_DTYPES and not _kernels().interpreted()
    return device.type == "cpu" and os.environ.get("TRITON_INTERPRET") == "1" and _kernels().interpreted()


def require_triton(device: torch.device, dtype: torch.dtype) -> None:
    """InputError naming why the Triton kernels cannot run these tensors, and the backend that can."""
    if not triton_available():
        raise _core.InputError("backend = 'triton': the triton package is not installed (it comes with torch's "
                               "Linux wheels); use 'torch'")
    if device.type == "cuda" and dtype not in CUDA_DTYPES:
        raise _core.InputError(f"backend = 'triton': runs bf16 and fp16 on CUDA, these are {dtype} (use 'torch' "
                               "for fp32)")
    if not triton_runs(device, dtype):
        raise _core.InputError(f"backend = 'triton': cannot run {dtype} tensors on {device} here: CUDA needs the "
                               "kernels compiled, CPU needs TRITON_INTERPRET=1 set before fulcrum.torch is imported "
                               "(use 'torch' or 'fulcrum')")


@dataclass(frozen=True)
class DeviceTable:
    """One instruction's block table on the device, and its launch grids."""

    arrays: dict[str, torch.Tensor]
    tiles: int
    blocks: int
    run_heads: int  # the most q heads a tile serves: the forward grid's second dimension


def device_table(plan: ParsedPlan, items: Sequence[Item], q: torch.Tensor, k: torch.Tensor) -> DeviceTable:
    """The items' block table on q's device, built on first use (the items checked against the buffers q and k)
    and kept with the plan."""
    key = ("triton", tuple(id(item) for item in items), str(q.device))
    cached = plan.kernel_cache.get(key)
    if cached is None:
        table = _core.block_table(kernel_tasks(plan, items), plan.q_heads, q.shape[0], k.shape[0])

        def on_device(name: str) -> torch.Tensor:
            values = np.asarray(table[name])
            if values.dtype == np.uint64:  # bit words: the kernels shift and test them as int64
                values = values.view(np.int64)
            return torch.from_numpy(np.ascontiguousarray(values)).to(q.device)

        heads = np.asarray(table["tile_head_end"]) - np.asarray(table["tile_head_begin"])
        cached = plan.kernel_cache[key] = DeviceTable({name: on_device(name) for name in TABLE_FIELDS},
                                                      len(table["tile_row"]), len(table["block_keys"]),
                                                      int(heads.max()) if len(heads) else 0)
    result: DeviceTable = cached
    return result


# Triton's type of every kernel argument by name, as the launches below pass them: storage pointers in the
# tensors' dtype ("{dtype}"), fp32 LSE, rowsum and gradients, the block table's int32/int64 arrays (as C++ builds
# them), fp32 scales; any other argument is a row or head stride or count (i32 at the sizes compiled ahead).
ARGUMENT_TYPES = {
    **dict.fromkeys(("Q", "K", "V", "OUT", "DO"), "*{dtype}"),
    **dict.fromkeys(("LSE", "DELTA", "DQ", "DK", "DV"), "*fp32"),
    **dict.fromkeys(("tile_row", "tile_rows", "tile_head_begin", "tile_head_end", "entry_tile", "entry_block",
                     "block_row", "block_keys", "gather"), "*i32"),
    **dict.fromkeys(("tile_entries", "entry_bits", "key_order", "block_entries", "block_gather", "bits"), "*i64"),
    **dict.fromkeys(("scale", "scale_log2"), "fp32"),
}


def compile_kernels(arch: int, dtype: torch.dtype, head_dim: int, group: int) -> dict[str, int]:
    """Compiles every kernel for NVIDIA compute capability ``arch`` (80: A100, 90: H100/H200) and ``dtype`` without a
    GPU (Triton's front end, then ptxas): what a GPU would run, checked where none is. Returns each kernel's shared
    memory in bytes. Needs the kernels compiled, not interpreted (TRITON_INTERPRET unset when fulcrum.torch is
    imported)."""
    from triton import compile as triton_compile
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    kernels = _kernels()
    if kernels.interpreted():
        raise _core.Error("compile_kernels: the Triton kernels are interpreted here (TRITON_INTERPRET=1)")
    names = {torch.bfloat16: "bf16", torch.float16: "fp16"}
    constants = {"GROUP": group, "D": head_dim, "DP": kernels.padded_dim(head_dim), "BLOCK": kernels.TILE,
                 "UPCAST": False}
    shared = {}
    for kernel in (kernels.forward_kernel, kernels.delta_kernel, kernels.backward_dq_kernel,
                   kernels.backward_dkdv_kernel):
        given = {n: constants[n] for n in kernel.arg_names if n in constants}
        signature = {n: "constexpr" if n in given else ARGUMENT_TYPES.get(n, "i32").format(dtype=names[dtype])
                     for n in kernel.arg_names}
        compiled = triton_compile(ASTSource(fn=kernel, signature=signature, constexprs=given),
                                  target=GPUTarget("cuda", arch, 32))
        shared[kernel.__name__] = int(compiled.metadata.shared)
    return shared


def _check_layout(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lse: torch.Tensor,
                  *others: tuple[torch.Tensor, torch.Tensor]) -> None:
    """The kernels index every tensor by one row and head stride per layout: q-like and k-like tensors must be
    contiguous and share their layout's shape, the LSE [rows, q_heads] contiguous."""
    for t in (q, k, v, lse, *(t for t, _ in others)):
        if not t.is_contiguous():
            raise _core.Error("triton kernels: a non-contiguous buffer")
    if lse.shape != q.shape[:2]:
        raise _core.Error(f"triton kernels: lse {tuple(lse.shape)} is not [rows, q_heads] of q {tuple(q.shape)}")
    if v.shape != k.shape:
        raise _core.Error(f"triton kernels: v {tuple(v.shape)} is not shaped as k {tuple(k.shape)}")
    for t, like in others:
        if t.shape != like.shape:
            raise _core.Error(f"triton kernels: a buffer {tuple(t.shape)} is not shaped as {tuple(like.shape)}")


class TritonBackend(ItemBackend):
    name = "triton"

    def forward_items(self, plan: ParsedPlan, items: Sequence[Item], q: torch.Tensor, k: torch.Tensor,
                      v: torch.Tensor, o: torch.Tensor, lse: torch.Tensor, *, scale: float) -> None:
        """Writes O and LSE of the items' query rows and heads (a row that sees no key: O = 0, LSE = -inf)."""
        if not items:
            return
        _check_layout(q, k, v, lse, (o, q))
        t = device_table(plan, items, q, k)
        if t.tiles == 0:
            return
        kernels = _kernels()
        a = t.arrays
        kernels.forward_kernel[(t.tiles, t.run_heads)](
            q, k, v, o, lse, q.stride(0), q.stride(1), k.stride(0), k.stride(1), lse.stride(0),
            a["tile_row"], a["tile_rows"], a["tile_head_begin"], a["tile_head_end"], a["tile_entries"],
            a["entry_block"], a["entry_bits"], a["block_row"], a["block_keys"], a["block_gather"], a["gather"],
            a["bits"], scale * kernels.LOG2E, GROUP=q.shape[1] // k.shape[1], D=q.shape[2],
            DP=kernels.padded_dim(q.shape[2]), BLOCK=kernels.TILE, UPCAST=kernels.interpreted())

    def backward_items(self, plan: ParsedPlan, items: Sequence[Item], q: torch.Tensor, k: torch.Tensor,
                       v: torch.Tensor, o: torch.Tensor, lse: torch.Tensor, d_o: torch.Tensor, dq: torch.Tensor,
                       dk: torch.Tensor, dv: torch.Tensor, *, scale: float) -> None:
        """Adds the items' gradients into dq, dk and dv, given the merged O and LSE of their rows."""
        if not items:
            return
        _check_layout(q, k, v, lse, (o, q), (d_o, q), (dq, q), (dk, k), (dv, k))
        t = device_table(plan, items, q, k)
        if t.tiles == 0:
            return
        kernels = _kernels()
        a = t.arrays
        delta = torch.empty(q.shape[:2], dtype=torch.float32, device=q.device)  # laid out as the LSE
        kernels.delta_kernel[(kernels.triton.cdiv(q.shape[0], kernels.TILE), q.shape[1])](
            o, d_o, delta, q.shape[0], q.stride(0), q.stride(1), delta.stride(0), D=q.shape[2],
            DP=kernels.padded_dim(q.shape[2]), BLOCK=kernels.TILE)
        common = dict(GROUP=q.shape[1] // k.shape[1], D=q.shape[2], DP=kernels.padded_dim(q.shape[2]),
                      BLOCK=kernels.TILE, UPCAST=kernels.interpreted())
        strides = (q.stride(0), q.stride(1), k.stride(0), k.stride(1), lse.stride(0))
        blocks = (a["block_row"], a["block_keys"], a["block_gather"], a["gather"], a["bits"], scale,
                  scale * kernels.LOG2E)
        kernels.backward_dq_kernel[(t.tiles, t.run_heads)](
            q, k, v, d_o, lse, delta, dq, *strides, a["tile_row"], a["tile_rows"], a["tile_head_begin"],
            a["tile_head_end"], a["tile_entries"], a["entry_block"], a["entry_bits"], *blocks, **common)
        if t.blocks:
            kernels.backward_dkdv_kernel[(t.blocks, k.shape[1])](
                q, k, v, d_o, lse, delta, dk, dv, *strides, a["tile_row"], a["tile_rows"], a["tile_head_begin"],
                a["tile_head_end"], a["entry_tile"], a["entry_bits"], a["key_order"], a["block_entries"], *blocks,
                **common)
