"""The kernel backends behind one interface, and which one a call gets.

A backend computes one fused Attention (or AttentionBackward) instruction over the executor's buffers:
forward writes O and LSE of every item's query rows and heads; backward adds dQ, dK, dV. Five exist:
``fulcrum`` (the C++ CPU kernels, CPU tensors), ``torch`` (explicit masked-softmax math, any device: the
reference and the fp32 fallback), ``fa2`` (the FlashAttention-2 built into torch >= 2.7, no package; CUDA
bf16/fp16, the items it cannot mask on ``triton``; on CPU sequence by sequence on torch's CPU flash
attention, which tests it without a GPU), ``triton`` (Fulcrum's block-sparse Triton kernels, every mask;
CUDA bf16/fp16, or CPU under TRITON_INTERPRET=1) and ``flash`` (the flash-attn package's varlen kernels,
CUDA bf16, chosen by name only).
``auto`` picks fulcrum on CPU, fa2 on CUDA for bf16/fp16, and torch for fp32 on CUDA (with a one-time
warning where bf16/fp16 must fall to it: a GPU or torch FA2 cannot run).
A caller may also pass a backend object of its own (anything with ``name``, ``forward`` and ``backward``),
e.g. a wrapper that times the kernel calls (bench/torch_training.py).
"""
from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import torch

from .. import _core
from .backend_fa2 import CUDA_DTYPES as FA2_CUDA_DTYPES
from .backend_fa2 import Fa2Backend, fa2_runs, require_fa2_device
from .backend_flash import FlashBackend, flash_available
from .backend_fulcrum import FulcrumBackend
from .backend_torch import TorchBackend
from .backend_triton import TritonBackend, require_triton
from .program import Attention, AttentionBackward, ParsedPlan

BACKENDS = ("auto", "fulcrum", "torch", "flash", "fa2", "triton")
FLASH_DTYPES = (torch.bfloat16,)  # flash-attn runs fp16 and bf16; plans store fp32 or bf16


@runtime_checkable
class KernelBackend(Protocol):
    name: str

    def forward(self, plan: ParsedPlan, op: Attention, buffers: Sequence[torch.Tensor], scale: float) -> None: ...

    def backward(self, plan: ParsedPlan, op: AttentionBackward, buffers: Sequence[torch.Tensor],
                 scale: float) -> None: ...


BackendChoice = str | KernelBackend  # a name in BACKENDS, or a backend object, which is used as it is


_warned_torch_on_cuda = False


def _warn_torch_on_cuda() -> None:
    """Once per process: auto has put CUDA bf16/fp16 attention on the torch math backend, which is not silent."""
    global _warned_torch_on_cuda
    if not _warned_torch_on_cuda:
        _warned_torch_on_cuda = True
        warnings.warn("fulcrum.torch: backend 'auto' runs CUDA bf16/fp16 attention on the 'torch' math backend, "
                      "about 70x slower than FlashAttention on an H200, because 'fa2' cannot run here (it needs "
                      "torch >= 2.7 and a GPU of compute capability >= 8.0)", RuntimeWarning, stacklevel=3)


def select_backend(name: BackendChoice, device: torch.device, dtype: torch.dtype) -> KernelBackend:
    """The backend called ``name`` for tensors on ``device`` of ``dtype``; InputError when it cannot run them.
    A backend object is returned as it is: it answers for the tensors it accepts."""
    if not isinstance(name, str):
        if not isinstance(name, KernelBackend):
            raise _core.InputError(f"backend: a {type(name).__name__}, neither a name ({', '.join(BACKENDS)}) nor a "
                                   "kernel backend (an object with name, forward and backward)")
        return name
    if name not in BACKENDS:
        raise _core.InputError(f"backend = '{name}': must be one of {', '.join(BACKENDS)}")
    if name == "auto":
        if device.type == "cpu":
            name = "fulcrum"
        elif device.type == "cuda" and dtype in FA2_CUDA_DTYPES and fa2_runs(device):
            name = "fa2"
        else:
            name = "torch"
            if device.type == "cuda" and dtype in FA2_CUDA_DTYPES:
                _warn_torch_on_cuda()
    if name == "fulcrum":
        if device.type != "cpu":
            raise _core.InputError(f"backend = 'fulcrum': runs on CPU tensors, these are on {device} (use 'torch')")
        return FulcrumBackend()
    if name == "fa2":
        if device.type == "cuda" and dtype not in FA2_CUDA_DTYPES:
            raise _core.InputError(f"backend = 'fa2': runs bf16 and fp16 on CUDA, these are {dtype} (use 'torch' "
                                   "for fp32)")
        if device.type not in ("cuda", "cpu"):
            raise _core.InputError(f"backend = 'fa2': runs on CUDA (and CPU) tensors, these are on {device} "
                                   "(use 'torch')")
        require_fa2_device(device)
        return Fa2Backend()
    if name == "triton":
        require_triton(device, dtype)
        return TritonBackend()
    if name == "flash":
        if device.type != "cuda" or dtype not in FLASH_DTYPES or not flash_available():
            raise _core.InputError(f"backend = 'flash': needs flash-attn installed and CUDA bf16 tensors, these "
                                   f"are {dtype} on {device}")
        return FlashBackend()
    return TorchBackend()
