"""Kernel backend "flash": FlashAttention-2's varlen kernels for CUDA tensors in bf16; the machinery it shares
with "fa2" (backend_fa2.py: the same kernels as PyTorch builds them in).

One Attention instruction becomes one ``flash_attn_varlen_func`` call per FA2 window its sequences need:
every query span of an item is one sequence of the batch against the item's key span (gathered, so
sequences may share keys). FA2 masks a band around each row's bottom-right-aligned diagonal, so an item
runs there only when it covers all heads, its document has no per-head masks, and each span's rectangle
is fully visible (whatever the mask kind) or a causal or sliding-window band that leaves every row a key
(``_span_pieces``). Every other item runs in the same instruction on Fulcrum's Triton kernels where they run
(backend_triton.py), else on the torch backend. Backward calls
flash-attn's varlen backward with the *merged* O and LSE, which makes each part's gradients exact
(kernels/merge.hpp).

``flash_layout`` (the CPU-side planning of the calls) is a pure function, tested without a GPU.
"""
from __future__ import annotations

import importlib
import importlib.util
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch

from .. import _core
from .backend_torch import TorchBackend
from .backend_triton import TritonBackend, triton_runs
from .lse_merge import merge_by_lse
from .program import Attention, AttentionBackward, Document, Item, ParsedPlan

# FlashAttention-2's local window (left, right) around each row's diagonal, aligned bottom-right: row i of a
# sequence of nq queries and nk keys sees key j when i + nk - nq - left <= j <= i + nk - nq + right; -1 leaves
# that side unbounded. (-1, -1): every pair; (-1, 0): causal.
Window = tuple[int, int]
FULL: Window = (-1, -1)
CAUSAL: Window = (-1, 0)


@dataclass(frozen=True)
class FlashCall:
    """One varlen call: sequence i is query rows q_spans[i] = (row, count) against key rows k_spans[i], every
    sequence under the same FA2 ``window``."""

    window: Window
    q_spans: tuple[tuple[int, int], ...]
    k_spans: tuple[tuple[int, int], ...]
    cu_seqlens_q: tuple[int, ...]
    cu_seqlens_k: tuple[int, ...]
    max_seqlen_q: int
    max_seqlen_k: int

    @property
    def causal(self) -> bool:
        return self.window == CAUSAL


@dataclass(frozen=True)
class FlashLayout:
    calls: tuple[FlashCall, ...]  # one per window, in window order, each only when it has sequences
    fallback: tuple[int, ...]  # indices of the items FA2 cannot run (Triton on CUDA, torch on CPU, run them)
    merges: bool = False  # some rows are in several calls (a lambda span's pieces): O and LSE merge by LSE


def window_rows(window: Window, queries: int, keys: int) -> np.ndarray:
    """Keys each of ``queries`` rows sees under ``window`` against ``keys`` keys (FA2's bottom-right rule)."""
    left, right = window
    i = np.arange(queries)
    lo = np.maximum(0, i + keys - queries - left) if left >= 0 else np.zeros(queries, dtype=np.int64)
    hi = np.minimum(keys - 1, i + keys - queries + right) if right >= 0 else np.full(queries, keys - 1)
    counts: np.ndarray = np.maximum(0, hi - lo + 1)
    return counts


def _rectangle_window(doc: Document, rows: tuple[int, int], keys: tuple[int, int]) -> Window | None:
    """The FA2 window that masks query positions [rows[0], +rows[1]) against key positions [keys[0], +keys[1])
    as ``doc.mask`` does, or None: FA2 cannot mask it, or a row would see no key (FA2's LSE for such a row is
    not the -inf a merge needs; the torch backend writes it). Causal, sliding-window and lambda masks are bands
    ending at each row's own position; in a rectangle whose keys end ``e`` positions after its queries
    (e <= 0) such a band is FA2's window (-1 or W - 1 + e, -e). A candidate is kept only when its pairs are
    the C++ mask's (``attention_pairs``, the one definition of the mask) and every row sees a key."""
    (position, count), (key_position, key_count) = rows, keys
    if count == 0 or key_count == 0:
        return None
    pairs = _core.attention_pairs(doc.mask, [(position, position + count)], (key_position, key_position + key_count),
                                  doc.length)
    if pairs == count * key_count:
        return FULL
    e = (key_position + key_count) - (position + count)
    if e > 0 or doc.mask.kind not in ("causal", "window", "lambda"):
        return None
    for window in ((-1, -e), (doc.mask.window - 1 + e, -e)):
        if window[0] >= -1:
            visible = window_rows(window, count, key_count)
            if visible.min() >= 1 and int(visible.sum()) == pairs:
                return window
    return None


# A piece of a span: query rows (row, count) against key rows (row, count) under one FA2 window.
Piece = tuple[tuple[int, int], tuple[int, int], Window]


def _span_pieces(doc: Document, span: tuple[int, int, int], keys: tuple[int, int, int]) -> list[Piece] | None:
    """The span against the item's keys as FA2 sequences, or None. One sequence when one window masks the
    rectangle. A lambda mask (sink keys plus a sliding window) is split by keys into the sink, seen causally,
    and the rest, seen through the window; rows before the end of the sink see only sink keys. The pieces of
    a row are merged by their LSE, which is exact."""
    row, position, count = span
    key_row, key_position, key_count = keys

    def piece(p0: int, n: int, k0: int, nk: int) -> Piece | None:
        window = _rectangle_window(doc, (p0, n), (k0, nk))
        return None if window is None else ((row + p0 - position, n), (key_row + k0 - key_position, nk), window)

    whole = piece(position, count, key_position, key_count)
    if whole is not None or doc.mask.kind != "lambda":
        return None if whole is None else [whole]
    sink, end, key_end = doc.mask.sink, position + count, key_position + key_count
    split = min(max(sink, key_position), key_end)  # sink keys: [key_position, split); the rest: [split, key_end)
    first = min(max(sink, position), end)  # rows that see only sink keys (causally): [position, first)
    wanted = [(position, first - position, key_position, min(key_end, first) - key_position),
              (first, end - first, key_position, split - key_position), (first, end - first, split, key_end - split)]
    kept: list[Piece] = []
    row_ranges = set()
    for p0, n, k0, nk in wanted:
        if n > 0 and nk > 0:
            made = piece(p0, n, k0, nk)
            if made is None:
                return None
            kept.append(made)
            row_ranges.add((p0, n))
    # Every row in a piece, and the pieces' pairs (disjoint by rows or keys, so they add) the mask's.
    rows_in_pieces = sum(n for _, n in row_ranges)
    pairs = sum(int(window_rows(w, rows[1], keys[1]).sum()) for rows, keys, w in kept)
    total = _core.attention_pairs(doc.mask, [(position, end)], (key_position, key_end), doc.length)
    return kept if rows_in_pieces == count and pairs == total else None


def _call(window: Window, sequences: list[tuple[tuple[int, int], tuple[int, int]]]) -> FlashCall:
    cu_q, cu_k = [0], [0]
    for (_, q_count), (_, k_count) in sequences:
        cu_q.append(cu_q[-1] + q_count)
        cu_k.append(cu_k[-1] + k_count)
    return FlashCall(window, tuple(s[0] for s in sequences), tuple(s[1] for s in sequences), tuple(cu_q), tuple(cu_k),
                     max(s[0][1] for s in sequences), max(s[1][1] for s in sequences))


def flash_layout(documents: Sequence[Document], items: Sequence[Item]) -> FlashLayout:
    """Which items of one fused call run on FA2, as which varlen calls (one per window), and which fall back."""
    sequences: dict[Window, list[tuple[tuple[int, int], tuple[int, int]]]] = {}
    fallback, merges = [], False
    for index, item in enumerate(items):
        doc = documents[item.doc]
        spans = [_span_pieces(doc, span, item.keys) for span in item.queries]
        if item.heads is not None or doc.head_masks or not spans or None in spans:
            fallback.append(index)
            continue
        for pieces in spans:
            assert pieces is not None
            merges = merges or len(pieces) > 1
            for rows, keys, window in pieces:
                sequences.setdefault(window, []).append((rows, keys))
    calls = tuple(_call(window, sequences[window]) for window in sorted(sequences))
    return FlashLayout(calls, tuple(fallback), merges)


def flash_backward_arguments(parameters: Sequence[str], values: Mapping[str, Any]) -> dict[str, Any]:
    """Keyword arguments for flash-attn's ``_flash_attn_varlen_backward``, whose parameters differ between
    releases (``window_size`` or ``window_size_left``/``_right``; ``softcap`` since 2.6): every named
    parameter gets its value; one this code does not know raises rather than being guessed."""
    defaults: dict[str, Any] = {"dropout_p": 0.0, "window_size": (-1, -1), "window_size_left": -1,
                                "window_size_right": -1, "softcap": 0.0, "alibi_slopes": None,
                                "deterministic": False, "rng_state": None, "zero_tensors": False}
    known = {**defaults, **values}
    unknown = [name for name in parameters if name not in known]
    if unknown:
        raise _core.Error(f"flash-attn's varlen backward takes parameters {unknown} this version of fulcrum does not "
                          "know; use backend='torch'")
    return {name: known[name] for name in parameters}


def flash_available() -> bool:
    return importlib.util.find_spec("flash_attn") is not None


def _index(spans: Sequence[tuple[int, int]], device: torch.device) -> torch.Tensor:
    return torch.cat([torch.arange(row, row + count, device=device) for row, count in spans])


class VarlenKernels(Protocol):
    """One library's varlen FlashAttention-2 calls, in one contract: q [total_q, heads, dim], k and v
    [total_k, kv_heads, dim] (GQA: kv_heads divides heads), sequences by ``call``'s cu_seqlens; the forward
    returns O and the LSE as [heads, total_q] fp32; the backward takes O and LSE (the *merged* ones) as inputs
    and returns dQ, dK, dV shaped as q, k, v."""

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, call: FlashCall, cu_q: torch.Tensor,
                cu_k: torch.Tensor, scale: float) -> tuple[torch.Tensor, torch.Tensor]: ...

    def backward(self, d_o: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor,
                 lse: torch.Tensor, call: FlashCall, cu_q: torch.Tensor, cu_k: torch.Tensor,
                 scale: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]: ...


class FlashAttnKernels:
    """The flash-attn package's varlen kernels (CUDA, fp16/bf16)."""

    def __init__(self) -> None:
        flash_attn_interface = importlib.import_module("flash_attn.flash_attn_interface")
        self._forward: Callable[..., Any] = flash_attn_interface.flash_attn_varlen_func
        self._backward: Callable[..., Any] = flash_attn_interface._flash_attn_varlen_backward
        self._backward_parameters = list(inspect.signature(self._backward).parameters)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, call: FlashCall, cu_q: torch.Tensor,
                cu_k: torch.Tensor, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
        out, lse, _ = self._forward(q, k, v, cu_q, cu_k, call.max_seqlen_q, call.max_seqlen_k, dropout_p=0.0,
                                    softmax_scale=scale, causal=call.causal, window_size=call.window,
                                    return_attn_probs=True)
        if lse.dim() != 2:
            raise _core.Error("flash-attn returned a padded LSE (a release before varlen LSE became [heads, "
                              "total_q]); upgrade flash-attn or use backend='fa2'")
        return out, lse

    def backward(self, d_o: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor,
                 lse: torch.Tensor, call: FlashCall, cu_q: torch.Tensor, cu_k: torch.Tensor,
                 scale: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        grads = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        values = {"dout": d_o, "q": q, "k": k, "v": v, "out": o, "softmax_lse": lse, "dq": grads[0], "dk": grads[1],
                  "dv": grads[2], "cu_seqlens_q": cu_q, "cu_seqlens_k": cu_k, "max_seqlen_q": call.max_seqlen_q,
                  "max_seqlen_k": call.max_seqlen_k, "softmax_scale": scale, "causal": call.causal,
                  "window_size": call.window, "window_size_left": call.window[0], "window_size_right": call.window[1]}
        self._backward(**flash_backward_arguments(self._backward_parameters, values))
        return grads


class VarlenBackend:
    """A backend over varlen FlashAttention-2 kernels: ``flash_layout``'s calls on ``kernels_for(device)``,
    the items they cannot mask on the torch backend in the same instruction."""

    def __init__(self, name: str, kernels_for: Callable[[torch.device], VarlenKernels],
                 fallback: TorchBackend | TritonBackend | None = None) -> None:
        self.name = name
        self._kernels_for = kernels_for
        self._chosen_fallback = fallback
        self._torch = TorchBackend()
        self._triton = TritonBackend()

    def _fallback(self, q: torch.Tensor) -> TorchBackend | TritonBackend:
        """Where the items FA2 cannot mask run: the backend given, else Fulcrum's Triton kernels on CUDA where they
        run, else the torch backend (on CPU too: interpreted Triton is for tests, which pass it explicitly)."""
        if self._chosen_fallback is not None:
            return self._chosen_fallback
        return self._triton if q.device.type == "cuda" and triton_runs(q.device, q.dtype) else self._torch

    def _layout(self, plan: ParsedPlan, op: Attention | AttentionBackward) -> FlashLayout:
        cached = plan.kernel_cache.get(("flash", id(op)))
        if cached is None:
            cached = plan.kernel_cache["flash", id(op)] = flash_layout(plan.documents, op.items)
        layout: FlashLayout = cached
        return layout

    @staticmethod
    def _gather(plan: ParsedPlan, call: FlashCall, device: torch.device) -> tuple[torch.Tensor, torch.Tensor,
                                                                                  torch.Tensor, torch.Tensor]:
        """The call's row indices and cu_seqlens on ``device``: built on first use and kept with the plan, so a
        step does no host work or host-to-device copy for them after its first."""
        key = ("flash-gather", id(call), str(device))
        cached = plan.kernel_cache.get(key)
        if cached is None:
            def cu(values: tuple[int, ...]) -> torch.Tensor:
                return torch.tensor(values, dtype=torch.int32, device=device)

            cached = plan.kernel_cache[key] = (
                _index(call.q_spans, device), _index(call.k_spans, device), cu(call.cu_seqlens_q),
                cu(call.cu_seqlens_k))
        gathered: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor] = cached
        return gathered

    def forward(self, plan: ParsedPlan, op: Attention, buffers: Sequence[torch.Tensor], scale: float) -> None:
        q, k, v, o, lse = (buffers[i] for i in (op.q, op.k, op.v, op.o, op.lse))
        layout = self._layout(plan, op)
        kernels = self._kernels_for(q.device) if layout.calls else None
        if layout.merges:  # the calls' rows start empty (O = 0, LSE = -inf) and each call merges into them
            for call in layout.calls:
                q_index = self._gather(plan, call, q.device)[0]
                o.index_fill_(0, q_index, 0.0)
                lse.index_fill_(0, q_index, -torch.inf)
        for call in layout.calls:
            assert kernels is not None
            q_index, k_index, cu_q, cu_k = self._gather(plan, call, q.device)
            out, call_lse = kernels.forward(q.index_select(0, q_index), k.index_select(0, k_index),
                                            v.index_select(0, k_index), call, cu_q, cu_k, scale)
            rows_lse = call_lse.T.float()
            if layout.merges:
                out, rows_lse = merge_by_lse(torch.stack([o.index_select(0, q_index).float(), out.float()]),
                                             torch.stack([lse.index_select(0, q_index), rows_lse]))
            o.index_copy_(0, q_index, out.to(o.dtype))
            lse.index_copy_(0, q_index, rows_lse)
        if layout.fallback:
            self._fallback(q).forward_items(plan, [op.items[i] for i in layout.fallback], q, k, v, o, lse,
                                            scale=scale)

    def backward(self, plan: ParsedPlan, op: AttentionBackward, buffers: Sequence[torch.Tensor], scale: float) -> None:
        q, k, v, o, lse, d_o, dq, dk, dv = (
            buffers[i] for i in (op.q, op.k, op.v, op.o, op.lse, op.d_o, op.dq, op.dk, op.dv))
        layout = self._layout(plan, op)
        kernels = self._kernels_for(q.device) if layout.calls else None
        for call in layout.calls:
            assert kernels is not None
            q_index, k_index, cu_q, cu_k = self._gather(plan, call, q.device)
            grads = kernels.backward(
                d_o.index_select(0, q_index), q.index_select(0, q_index), k.index_select(0, k_index),
                v.index_select(0, k_index), o.index_select(0, q_index), lse.index_select(0, q_index).T.contiguous(),
                call, cu_q, cu_k, scale)
            dq.index_add_(0, q_index, grads[0].float())
            dk.index_add_(0, k_index, grads[1].float())
            dv.index_add_(0, k_index, grads[2].float())
        if layout.fallback:
            fallback = [op.items[i] for i in layout.fallback]
            self._fallback(q).backward_items(plan, fallback, q, k, v, o, lse, d_o, dq, dk, dv, scale=scale)


class FlashBackend(VarlenBackend):
    def __init__(self) -> None:
        kernels = FlashAttnKernels()
        super().__init__("flash", lambda device: kernels)
