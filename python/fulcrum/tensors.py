"""The CPU kernels on any CPU array that speaks DLPack (torch tensors included), zero-copy.

``fulcrum._core.attention_forward`` / ``attention_backward`` read NumPy arrays in place. These wrappers
(exported as ``fulcrum.attention_forward`` / ``fulcrum.attention_backward``) also take CPU tensors of any
DLPack producer, viewed through ``numpy.from_dlpack`` (no copy: the kernels read the tensor's memory and
write into given outputs in place), and return tensors of the caller's kind: given torch tensors, torch
tensors back, sharing memory with the arrays the kernels wrote. bf16 torch tensors are viewed as the
uint16 bit patterns the kernels take. LSE keeps the kernels' token-major layout [rows, heads];
fulcrum.torch.attention returns FlashAttention's [heads, rows].
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from . import _core


def _is_torch(x: Any) -> bool:
    return type(x).__module__.split(".")[0] == "torch"


def _as_array(x: Any, name: str) -> Any:
    """A NumPy view of ``x`` (None and NumPy arrays pass through); InputError naming ``name`` if impossible."""
    if x is None or isinstance(x, np.ndarray):
        return x
    if not hasattr(x, "__dlpack__"):
        return x  # the binding names the argument and the types it takes
    device = getattr(x, "device", None)
    if device is not None and getattr(device, "type", "cpu") != "cpu":
        raise _core.InputError(f"{name}: a tensor on {device}; the C++ kernels run on CPU memory "
                               "(on GPUs, fulcrum.torch.attention runs the CUDA path)")
    if _is_torch(x) and str(x.dtype) == "torch.bfloat16":
        import torch

        x = x.view(torch.uint16)  # the kernels take bf16 as its bit patterns
    try:
        return np.from_dlpack(x)
    except (BufferError, TypeError) as error:
        raise _core.InputError(f"{name}: cannot be viewed as a CPU array ({error})") from error


def _as_caller_kind(array: Any, like: Any) -> Any:
    if not _is_torch(like):
        return array
    import torch
    from torch.utils.dlpack import from_dlpack

    out = from_dlpack(array)
    return out.view(torch.bfloat16) if out.dtype == torch.uint16 else out


def attention_forward(tasks: Sequence[_core.AttentionTask], q: Any, k: Any, v: Any, o: Any = None, lse: Any = None,
                      scale: float = 0.0) -> tuple[Any, Any]:
    """O and LSE of ``tasks`` over q [rows, q_heads, dim], k and v [rows, kv_heads, dim] (NumPy arrays or
    CPU tensors, fp32 or bf16), written into ``o`` and ``lse`` when given. See fulcrum._core.attention_forward."""
    args = {name: _as_array(t, name) for name, t in (("q", q), ("k", k), ("v", v), ("o", o), ("lse", lse))}
    o_out, lse_out = _core.attention_forward(tasks, args["q"], args["k"], args["v"], args["o"], args["lse"], scale)
    return _as_caller_kind(o_out, q), _as_caller_kind(lse_out, q)


def attention_backward(tasks: Sequence[_core.AttentionTask], q: Any, k: Any, v: Any, o: Any, lse: Any, d_o: Any,
                       dq: Any = None, dk: Any = None, dv: Any = None, scale: float = 0.0) -> tuple[Any, Any, Any]:
    """dQ, dK, dV (fp32) of ``tasks``, added into ``dq``, ``dk``, ``dv`` when given. Arrays as for
    attention_forward. See fulcrum._core.attention_backward."""
    named = (("q", q), ("k", k), ("v", v), ("o", o), ("lse", lse), ("d_o", d_o), ("dq", dq), ("dk", dk), ("dv", dv))
    a = {name: _as_array(t, name) for name, t in named}
    grads = _core.attention_backward(tasks, a["q"], a["k"], a["v"], a["o"], a["lse"], a["d_o"], a["dq"], a["dk"],
                                     a["dv"], scale)
    dq_out, dk_out, dv_out = (_as_caller_kind(g, q) for g in grads)
    return dq_out, dk_out, dv_out
