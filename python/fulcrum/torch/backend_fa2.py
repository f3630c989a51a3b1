"""Kernel backend "fa2": FlashAttention-2 as PyTorch builds it in (the kernels behind SDPA), no extra package.

On CUDA, ``flash_layout``'s varlen calls go to ``torch.ops.aten._flash_attention_forward`` and
``_flash_attention_backward`` (what ``torch.nn.attention.varlen`` and torch's context parallel call): GQA
native, the LSE returned unpadded as [heads, total_q] fp32 (torch >= 2.7), and the backward takes O and LSE
as inputs, so it runs from the *merged* O and LSE and each part's gradients are exact. On CPU the same calls
run sequence by sequence on ``aten._scaled_dot_product_flash_attention_for_cpu`` and its backward, which keep
that contract (LSE out; O and LSE in): the backend's logic is then tested where CI runs, without a GPU.
Items FA2 cannot mask run in the same instruction on Fulcrum's Triton kernels on CUDA (backend_triton.py),
on the torch backend on CPU.

Arguments are passed positionally up to ``return_debug_mask`` / ``unused`` and by name after, which the
schemas of torch 2.7 to 2.15 share (``fa2_schemas_supported`` checks the installed ones).
"""
from __future__ import annotations

import functools

import torch

from .. import _core
from .backend_flash import FULL, FlashCall, VarlenBackend, VarlenKernels
from .backend_torch import TorchBackend
from .backend_triton import TritonBackend

MIN_TORCH = (2, 7)
CUDA_DTYPES = (torch.bfloat16, torch.float16)
# The leading parameters this backend passes by position, as the installed schemas must name them.
FORWARD_PARAMETERS = ("query", "key", "value", "cum_seq_q", "cum_seq_k", "max_q", "max_k", "dropout_p", "is_causal",
                      "return_debug_mask", "scale")
BACKWARD_PARAMETERS = ("grad_out", "query", "key", "value", "out", "logsumexp", "cum_seq_q", "cum_seq_k", "max_q",
                       "max_k", "dropout_p", "is_causal", None, None, "scale")  # None: the RNG state's two tensors


def torch_version(text: str) -> tuple[int, int]:
    """(major, minor) of a torch version string such as '2.11.0+cu130'."""
    parts = text.split("+")[0].split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError) as error:
        raise _core.InputError(f"torch version '{text}': not major.minor[.patch]") from error


def require_fa2_torch(version: str = torch.__version__) -> None:
    """InputError naming the version when the installed torch is older than the FA2 contract this needs."""
    if torch_version(version) < MIN_TORCH:
        raise _core.InputError(
            f"backend = 'fa2': needs torch >= {MIN_TORCH[0]}.{MIN_TORCH[1]} (its flash attention ops return the "
            f"varlen LSE as [heads, total_q] and take O and LSE in backward); this is torch {version}: upgrade "
            "torch, or use backend='torch'")


def require_fa2_device(device: torch.device) -> None:
    """InputError unless ``device`` can run FlashAttention-2 (CUDA: compute capability 8.0 or newer)."""
    if device.type == "cuda" and torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability(device)
        if major < 8:
            raise _core.InputError(
                f"backend = 'fa2': FlashAttention-2 needs compute capability >= 8.0 (Ampere or newer); "
                f"{torch.cuda.get_device_name(device)} is {major}.{minor} (use 'torch')")


def fa2_runs(device: torch.device) -> bool:
    """Whether ``fa2`` can run on ``device`` in this process (auto's test; selecting it by name explains why not)."""
    try:
        require_fa2_torch()
        require_fa2_device(device)
        fa2_schemas_supported()
    except _core.Error:
        return False
    return True


def require_fa2_head_dim(head_dim: int) -> None:
    if head_dim % 8 or not 8 <= head_dim <= 256:
        raise _core.InputError(f"backend = 'fa2': head_dim = {head_dim}: FlashAttention-2 runs multiples of 8 up to "
                               "256 (use 'torch')")


def _parameter_names(op: torch._ops.OpOverload) -> list[str]:
    return [argument.name for argument in op._schema.arguments]


def schema_mismatch(names: list[str], expected: tuple[str | None, ...]) -> str | None:
    """Why parameters ``names`` (a schema's, in order) cannot take ``expected`` (positional names, then
    ``scale`` by keyword; None: any name), or None when they can."""
    positional = expected[:-1]
    if len(names) < len(positional):
        return f"{len(names)} parameters, fewer than the {len(positional)} passed by position"
    for i, name in enumerate(positional):
        if name is not None and names[i] != name:
            return f"parameter {i} is '{names[i]}', not '{name}'"
    return None if expected[-1] in names else f"no parameter '{expected[-1]}'"


@functools.cache  # once per process: a backend is made for every attention call
def fa2_schemas_supported() -> None:
    """Raises Error unless the installed aten flash ops take the parameters this backend passes, in order."""
    for op, expected in ((torch.ops.aten._flash_attention_forward.default, FORWARD_PARAMETERS),
                         (torch.ops.aten._flash_attention_backward.default, BACKWARD_PARAMETERS)):
        why = schema_mismatch(_parameter_names(op), expected)
        if why is not None:
            raise _core.Error(f"{op._schema.name} in torch {torch.__version__}: {why}; backend 'fa2' cannot call "
                              "it (use backend='torch')")


class AtenCudaKernels:
    """torch's CUDA FlashAttention-2, varlen, one call per FlashCall."""

    @staticmethod
    def _window(call: FlashCall) -> dict[str, int]:
        """The window keywords: none for a full or causal call (is_causal says it), else both sides."""
        if call.window == FULL or call.causal:
            return {}
        return {"window_size_left": call.window[0], "window_size_right": call.window[1]}

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, call: FlashCall, cu_q: torch.Tensor,
                cu_k: torch.Tensor, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
        require_fa2_head_dim(q.shape[-1])
        out, lse, *_ = torch.ops.aten._flash_attention_forward(
            q, k, v, cu_q, cu_k, call.max_seqlen_q, call.max_seqlen_k, 0.0, call.causal, False, scale=scale,
            **self._window(call))
        return out, lse

    def backward(self, d_o: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor,
                 lse: torch.Tensor, call: FlashCall, cu_q: torch.Tensor, cu_k: torch.Tensor,
                 scale: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        # No dropout: the kernel reads no RNG state, so empty tensors stand in for the forward's.
        rng = torch.empty(2, dtype=torch.uint64, device=q.device), torch.empty(0, device=q.device)
        dq, dk, dv = torch.ops.aten._flash_attention_backward(
            d_o, q, k, v, o, lse, cu_q, cu_k, call.max_seqlen_q, call.max_seqlen_k, 0.0, call.causal, *rng,
            scale=scale, **self._window(call))
        return dq, dk, dv


class AtenCpuKernels:
    """The same calls on torch's CPU flash attention, one sequence at a time ([1, heads, rows, dim]). Its causal
    mask is aligned top-left, FA2's windows bottom-right: a sequence gets is_causal only where the two agree
    (a square causal one), else its window as an explicit mask. GQA: the kv heads are repeated, and their
    gradients summed back."""

    @staticmethod
    def _sequences(call: FlashCall) -> list[tuple[slice, slice, torch.Tensor | None, bool]]:
        out: list[tuple[slice, slice, torch.Tensor | None, bool]] = []
        left, right = call.window
        for i in range(len(call.q_spans)):
            rows = slice(call.cu_seqlens_q[i], call.cu_seqlens_q[i + 1])
            keys = slice(call.cu_seqlens_k[i], call.cu_seqlens_k[i + 1])
            n_q, n_k = rows.stop - rows.start, keys.stop - keys.start
            if call.window == FULL or (call.causal and n_q == n_k):
                out.append((rows, keys, None, call.causal))
                continue
            visible = torch.ones(n_q, n_k, dtype=torch.bool)
            if right >= 0:  # row i sees keys up to i + n_k - n_q + right
                visible = visible.tril(n_k - n_q + right)
            if left >= 0:  # ... and from i + n_k - n_q - left
                visible = visible.triu(n_k - n_q - left)
            out.append((rows, keys, torch.zeros(n_q, n_k).masked_fill_(~visible, -torch.inf), False))
        return out

    @staticmethod
    def _heads(x: torch.Tensor, heads: int) -> torch.Tensor:
        """[rows, h, dim] -> [1, heads, rows, dim], kv heads repeated for their query heads."""
        return x.repeat_interleave(heads // x.shape[1], dim=1).transpose(0, 1).unsqueeze(0)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, call: FlashCall, cu_q: torch.Tensor,
                cu_k: torch.Tensor, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
        heads = q.shape[1]
        out, lse = torch.empty_like(q), torch.empty(heads, q.shape[0], dtype=torch.float32)
        for rows, keys, mask, causal in self._sequences(call):
            o, lse_s = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
                self._heads(q[rows], heads), self._heads(k[keys], heads), self._heads(v[keys], heads), 0.0, causal,
                attn_mask=None if mask is None else mask.to(q.dtype), scale=scale)
            out[rows] = o[0].transpose(0, 1)
            lse[:, rows] = lse_s[0].float()
        return out, lse

    def backward(self, d_o: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor,
                 lse: torch.Tensor, call: FlashCall, cu_q: torch.Tensor, cu_k: torch.Tensor,
                 scale: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        heads, group = q.shape[1], q.shape[1] // k.shape[1]
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        for rows, keys, mask, causal in self._sequences(call):
            grads = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward(
                self._heads(d_o[rows], heads), self._heads(q[rows], heads), self._heads(k[keys], heads),
                self._heads(v[keys], heads), self._heads(o[rows], heads), lse[:, rows].contiguous().unsqueeze(0), 0.0,
                causal,
                attn_mask=None if mask is None else mask.to(q.dtype), scale=scale)
            dq[rows] = grads[0][0].transpose(0, 1)
            for dst, grad in ((dk, grads[1]), (dv, grads[2])):  # [1, heads, n, dim] -> [n, kv_heads, dim]
                dst[keys] = grad[0].unflatten(0, (heads // group, group)).sum(1).transpose(0, 1)
        return dq, dk, dv


def fa2_kernels(device: torch.device) -> VarlenKernels:
    return AtenCudaKernels() if device.type == "cuda" else AtenCpuKernels()


class Fa2Backend(VarlenBackend):
    def __init__(self, fallback: TorchBackend | TritonBackend | None = None) -> None:
        require_fa2_torch()
        fa2_schemas_supported()
        super().__init__("fa2", fa2_kernels, fallback)
