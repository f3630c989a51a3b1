"""Fulcrum's block-sparse attention kernels in Triton, forward and backward, for every mask FlashAttention-2
cannot express (block-sparse, vertical-slash, blockwise, shared-question, striped, per-head masks).

They run a block table (``_core.block_table``, kernels/block_table.hpp: the C++ masks decide every tile)
rather than a mask: 64-row query tiles per run of q heads, 64-key blocks (contiguous key rows, or gathered
vertical columns) and the (tile, block) entries that hold a visible pair, each entry full or with one 64-bit
word per row. Written by hand because no library kernel takes per-tile token masks over varlen, GQA,
gathered-column work with the LSE out and the merged O/LSE in (FlexAttention's block masks are per batch
and head, not per varlen item).

- ``forward``: one program per (query tile, q head) runs the online softmax over its entries and writes O (in
  the storage dtype) and the LSE (fp32; -inf and O = 0 for a row that sees no key). A non-finite input reaches
  the rows the reference's does: a NaN q or k through the scores, a non-finite value as a NaN O on exactly
  the rows that see its key.
- ``delta``: rowsum(dO * O) in fp32 per row and q head, what both backward kernels subtract (FlashAttention's
  preprocessing step), without the fp32 copies of dO and O that computing it in torch would make.
- ``backward_dq``: one program per (query tile, q head) adds its dQ, from the merged O and LSE.
- ``backward_dkdv``: one program per (key block, kv head) walks the block's entries key-major over the q heads
  of its GQA group and adds dK and dV atomically (blocks of different items may hold the same key rows).

Scores are fp32 (``tl.dot`` accumulates in fp32); P is rounded to the storage dtype before P V, as
FlashAttention does. Whether the kernels are interpreted (``TRITON_INTERPRET=1``: they then run on CPU
tensors, which is how CI tests them) is fixed when this module is imported, as ``triton.jit`` decides it.
"""
from __future__ import annotations

import math

import triton
import triton.language as tl

TILE = 64  # rows of a query tile, keys of a key block, bits of a row word: the block table's (C++) tile
LOG2E = 1.4426950408889634  # the kernels work in base 2 (exp2): scores are scaled by scale * LOG2E


def interpreted() -> bool:
    """Whether these kernels run in Triton's interpreter (on CPU tensors) rather than compiled for a GPU."""
    return not isinstance(forward_kernel, triton.runtime.JITFunction)


def padded_dim(head_dim: int) -> int:
    """tl.arange needs a power of two, tl.dot at least 16."""
    return max(16, 1 << math.ceil(math.log2(head_dim)))


@triton.jit
def _dot(a, b, UPCAST: tl.constexpr):
    """a @ b accumulated in fp32. UPCAST (interpreted only): Triton's interpreter multiplies bf16 as its raw bits
    (numpy has no bf16), so operands go to fp32 first, which is exact: the same products as the GPU's."""
    if UPCAST:
        a = a.to(tl.float32)
        b = b.to(tl.float32)
    return tl.dot(a, b)


@triton.jit
def _key_block(b, block_row, block_keys, block_gather, gather, offs_n):
    """Buffer rows of key block ``b`` (contiguous, or gathered columns) and which of the 64 are keys."""
    keys = tl.load(block_keys + b)
    first_gathered = tl.load(block_gather + b)
    is_key = offs_n < keys
    if first_gathered >= 0:
        rows = tl.load(gather + first_gathered + offs_n, mask=is_key, other=0)
    else:
        rows = tl.load(block_row + b) + offs_n
    return rows.to(tl.int64), is_key


@triton.jit
def _key_tile(K, V, b, kv_head, k_row, k_head, block_row, block_keys, block_gather, gather, offs_n, offs_d, in_dim):
    """Key block ``b``'s K and V rows of ``kv_head`` ([64, DP], zero past its keys and the head dimension), their
    offsets and mask (for dK/dV's adds) and which of the 64 are keys."""
    keys, is_key = _key_block(b, block_row, block_keys, block_gather, gather, offs_n)
    kv_at = keys[:, None] * k_row + kv_head * k_head + offs_d[None, :]
    kv_mask = is_key[:, None] & in_dim[None, :]
    return tl.load(K + kv_at, mask=kv_mask, other=0.0), tl.load(V + kv_at, mask=kv_mask, other=0.0), kv_at, kv_mask, \
        is_key


@triton.jit
def _visible(bits, entry_bits, offs_m, offs_n, is_row, is_key):
    """[tile rows, block keys]: the pairs an entry computes (every pair, or the set bits of its row words)."""
    visible = is_row[:, None] & is_key[None, :]
    if entry_bits >= 0:
        words = tl.load(bits + entry_bits + offs_m)
        visible = visible & (((words[:, None] >> offs_n[None, :].to(tl.int64)) & 1) != 0)
    return visible


@triton.jit
def _tile_rows(tile, tile_row, tile_rows, offs_m):
    rows = tl.load(tile_row + tile) + offs_m
    return rows.to(tl.int64), offs_m < tl.load(tile_rows + tile)


@triton.jit
def _query_tile(tile, head, q_row, q_head, tile_row, tile_rows, BLOCK: tl.constexpr, DP: tl.constexpr,
                D: tl.constexpr):
    """Offsets of a query tile's program: rows and keys of a tile, the head dimension, and the tile's rows of
    ``head`` (their buffer rows, which are rows, their offsets in a q-like tensor and its load mask)."""
    offs_m = tl.arange(0, BLOCK)
    offs_n = tl.arange(0, BLOCK)
    offs_d = tl.arange(0, DP)
    in_dim = offs_d < D
    rows, is_row = _tile_rows(tile, tile_row, tile_rows, offs_m)
    q_at = rows[:, None] * q_row + head * q_head + offs_d[None, :]
    return offs_m, offs_n, offs_d, in_dim, rows, is_row, q_at, is_row[:, None] & in_dim[None, :]


@triton.jit
def forward_kernel(Q, K, V, OUT, LSE, q_row, q_head, k_row, k_head, lse_row,
                   tile_row, tile_rows, tile_head_begin, tile_head_end, tile_entries, entry_block, entry_bits,
                   block_row, block_keys, block_gather, gather, bits, scale_log2,
                   GROUP: tl.constexpr, D: tl.constexpr, DP: tl.constexpr, BLOCK: tl.constexpr,
                   UPCAST: tl.constexpr):
    tile = tl.program_id(0)
    head = tl.load(tile_head_begin + tile) + tl.program_id(1)
    if head < tl.load(tile_head_end + tile):
        kv_head = head // GROUP
        offs_m, offs_n, offs_d, in_dim, rows, is_row, q_at, q_mask = _query_tile(tile, head, q_row, q_head, tile_row,
                                                                                 tile_rows, BLOCK, DP, D)
        q = tl.load(Q + q_at, mask=q_mask, other=0.0)
        m = tl.full([BLOCK], float("-inf"), tl.float32)
        row_sum = tl.zeros([BLOCK], tl.float32)
        acc = tl.zeros([BLOCK, DP], tl.float32)
        poisoned = tl.zeros([BLOCK], tl.int1)  # the row sees a key whose value is not finite
        for e in range(tl.load(tile_entries + tile), tl.load(tile_entries + tile + 1)):
            k, v, _, _, is_key = _key_tile(K, V, tl.load(entry_block + e), kv_head, k_row, k_head, block_row,
                                           block_keys, block_gather, gather, offs_n, offs_d, in_dim)
            visible = _visible(bits, tl.load(entry_bits + e), offs_m, offs_n, is_row, is_key)
            s = tl.where(visible, _dot(q, tl.trans(k), UPCAST) * scale_log2, float("-inf"))
            # A NaN score (a NaN q or k) must reach the row: tl.max may skip it, so add it back.
            m_new = tl.maximum(m, tl.max(s, 1)) + tl.sum(tl.where(s == s, 0.0, s), 1)
            m_shift = tl.where(m_new == float("-inf"), 0.0, m_new)  # a row that has seen nothing yet stays empty
            alpha = tl.exp2(m - m_shift)
            p = tl.exp2(s - m_shift[:, None])
            row_sum = row_sum * alpha + tl.sum(p, 1)
            # A non-finite value reaches only the rows that see its key, as in the fp64 reference: P V of the
            # whole tile would give 0 x NaN to the rows the mask hides.
            finite = tl.abs(v.to(tl.float32)) < float("inf")
            bad_key = tl.max(tl.where(finite, 0, 1), 1) > 0
            poisoned = poisoned | (tl.max(tl.where(visible & bad_key[None, :], 1, 0), 1) > 0)
            acc = acc * alpha[:, None] + _dot(p.to(v.dtype), tl.where(finite, v, 0.0).to(v.dtype), UPCAST)
            m = m_new
        seen = row_sum != 0.0  # NaN (from a NaN score) counts as seen: O and LSE stay NaN
        l_safe = tl.where(seen, row_sum, 1.0)
        o = tl.where(poisoned[:, None], float("nan"), acc / l_safe[:, None])
        tl.store(OUT + q_at, o.to(OUT.dtype.element_ty), mask=q_mask)
        lse = tl.where(seen, (m + tl.log2(l_safe)) * 0.6931471805599453, float("-inf"))
        tl.store(LSE + rows * lse_row + head, lse, mask=is_row)


@triton.jit
def delta_kernel(OUT, DO, DELTA, rows, q_row, q_head, delta_row, D: tl.constexpr, DP: tl.constexpr,
                 BLOCK: tl.constexpr):
    offs_m = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    head = tl.program_id(1)
    offs_d = tl.arange(0, DP)
    mask = (offs_m < rows)[:, None] & (offs_d < D)[None, :]
    at = offs_m.to(tl.int64)[:, None] * q_row + head * q_head + offs_d[None, :]
    o = tl.load(OUT + at, mask=mask, other=0.0).to(tl.float32)
    d_o = tl.load(DO + at, mask=mask, other=0.0).to(tl.float32)
    tl.store(DELTA + offs_m.to(tl.int64) * delta_row + head, tl.sum(o * d_o, 1), mask=offs_m < rows)


@triton.jit
def backward_dq_kernel(Q, K, V, DO, LSE, DELTA, DQ, q_row, q_head, k_row, k_head, lse_row,
                       tile_row, tile_rows, tile_head_begin, tile_head_end, tile_entries, entry_block, entry_bits,
                       block_row, block_keys, block_gather, gather, bits, scale, scale_log2,
                       GROUP: tl.constexpr, D: tl.constexpr, DP: tl.constexpr, BLOCK: tl.constexpr,
                       UPCAST: tl.constexpr):
    tile = tl.program_id(0)
    head = tl.load(tile_head_begin + tile) + tl.program_id(1)
    if head < tl.load(tile_head_end + tile):
        kv_head = head // GROUP
        offs_m, offs_n, offs_d, in_dim, rows, is_row, q_at, q_mask = _query_tile(tile, head, q_row, q_head, tile_row,
                                                                                 tile_rows, BLOCK, DP, D)
        q = tl.load(Q + q_at, mask=q_mask, other=0.0)
        d_o = tl.load(DO + q_at, mask=q_mask, other=0.0)
        lse = tl.load(LSE + rows * lse_row + head, mask=is_row, other=float("-inf"))
        seen = lse > float("-inf")
        lse2 = tl.where(seen, lse * 1.4426950408889634, 0.0)
        delta = tl.load(DELTA + rows * lse_row + head, mask=is_row, other=0.0)
        dq = tl.zeros([BLOCK, DP], tl.float32)
        for e in range(tl.load(tile_entries + tile), tl.load(tile_entries + tile + 1)):
            k, v, _, _, is_key = _key_tile(K, V, tl.load(entry_block + e), kv_head, k_row, k_head, block_row,
                                           block_keys, block_gather, gather, offs_n, offs_d, in_dim)
            visible = _visible(bits, tl.load(entry_bits + e), offs_m, offs_n, is_row, is_key) & seen[:, None]
            p = tl.where(visible, tl.exp2(_dot(q, tl.trans(k), UPCAST) * scale_log2 - lse2[:, None]), 0.0)
            ds = p * (_dot(d_o, tl.trans(v), UPCAST) - delta[:, None])
            dq += _dot(ds.to(k.dtype), k, UPCAST)
        dq_at = DQ + rows[:, None] * q_row + head * q_head + offs_d[None, :]
        tl.store(dq_at, tl.load(dq_at, mask=q_mask, other=0.0) + dq * scale, mask=q_mask)


@triton.jit
def backward_dkdv_kernel(Q, K, V, DO, LSE, DELTA, DK, DV, q_row, q_head, k_row, k_head, lse_row,
                         tile_row, tile_rows, tile_head_begin, tile_head_end, entry_tile, entry_bits, key_order,
                         block_entries, block_row, block_keys, block_gather, gather, bits, scale, scale_log2,
                         GROUP: tl.constexpr, D: tl.constexpr, DP: tl.constexpr, BLOCK: tl.constexpr,
                       UPCAST: tl.constexpr):
    block = tl.program_id(0)
    kv_head = tl.program_id(1)
    offs_m = tl.arange(0, BLOCK)
    offs_n = tl.arange(0, BLOCK)
    offs_d = tl.arange(0, DP)
    in_dim = offs_d < D
    k, v, kv_at, kv_mask, is_key = _key_tile(K, V, block, kv_head, k_row, k_head, block_row, block_keys,
                                             block_gather, gather, offs_n, offs_d, in_dim)
    dk = tl.zeros([BLOCK, DP], tl.float32)
    dv = tl.zeros([BLOCK, DP], tl.float32)
    for i in range(tl.load(block_entries + block), tl.load(block_entries + block + 1)):
        e = tl.load(key_order + i)
        tile = tl.load(entry_tile + e)
        rows, is_row = _tile_rows(tile, tile_row, tile_rows, offs_m)
        visible = _visible(bits, tl.load(entry_bits + e), offs_m, offs_n, is_row, is_key)
        q_mask = is_row[:, None] & in_dim[None, :]
        first = tl.maximum(tl.load(tile_head_begin + tile), kv_head * GROUP)
        last = tl.minimum(tl.load(tile_head_end + tile), kv_head * GROUP + GROUP)
        for head in range(first, last):
            q_at = rows[:, None] * q_row + head * q_head + offs_d[None, :]
            q = tl.load(Q + q_at, mask=q_mask, other=0.0)
            d_o = tl.load(DO + q_at, mask=q_mask, other=0.0)
            lse = tl.load(LSE + rows * lse_row + head, mask=is_row, other=float("-inf"))
            seen = lse > float("-inf")
            lse2 = tl.where(seen, lse * 1.4426950408889634, 0.0)
            delta = tl.load(DELTA + rows * lse_row + head, mask=is_row, other=0.0)
            scores = _dot(q, tl.trans(k), UPCAST) * scale_log2
            p = tl.where(visible & seen[:, None], tl.exp2(scores - lse2[:, None]), 0.0)
            dv += _dot(tl.trans(p.to(d_o.dtype)), d_o, UPCAST)
            ds = p * (_dot(d_o, tl.trans(v), UPCAST) - delta[:, None])
            dk += _dot(tl.trans(ds.to(q.dtype)), q, UPCAST)
    tl.atomic_add(DK + kv_at, dk * scale, mask=kv_mask)
    tl.atomic_add(DV + kv_at, dv, mask=kv_mask)
