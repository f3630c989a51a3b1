#!/usr/bin/env python3
"""FlexAttn's runtime profile measured with PyTorch (GPU or CPU): the RuntimeProfile JSON the head cost model
reads (src/fulcrum/planners/heads/cost_model.hpp), measuring what `fulcrum profile --heads` measures with the
CPU kernels (src/fulcrum/prefill/head_profile.cpp), so the two files are interchangeable:

  - attention_s[KEY][i]: one head's causal attention forward (batch 1, one head, q = k = v length T, head_dim d)
    under exactly the (query, key) pairs Fulcrum's heads::to_mask keeps for pattern KEY at T, with the mask seed
    head_mask_seed(--seed, 0, 0) as the C++ profiler uses: the masks are heads::to_mask's own, through the
    fulcrum module (fulcrum.head_pattern_mask).
  - t_qo_s[i]: the Q and O projections of one head, [T x hidden]·[hidden x d] and [T x d]·[d x hidden];
    t_qkvo_s[i] adds the K and V projections (same shape as Q). Each GEMM is timed on its own (median), then summed.
  - Each time: the median of --repeats runs after warm-up (CUDA events on cuda, perf_counter on cpu). cuda: two
    warm-up runs (the first compiles); cpu: one, as the C++ profiler.

Kernel: torch.nn.attention.flex_attention with a BlockMask of 128 x 128 tiles built directly from block-level
index tensors (exact per-tile kept-pair counts: empty tiles skipped, full tiles run without the mask_mod, partial
tiles apply a token-exact mask_mod). On cuda flex_attention runs under torch.compile (dynamic=False); on cpu it
runs eagerly (PyTorch's unfused reference, for tests). `full` runs through flex too (causal mask_mod) unless
--full-kernel sdpa (F.scaled_dot_product_attention(is_causal=True)). Building the mask (sampling, tile counts,
BlockMask) is per-prompt setup in a real prefill and is NOT timed; the JSON's `device` string says so. --out (and
--details) are rewritten after each prompt length, so a run cut short leaves a valid profile of the lengths done.

--check verifies the mask path before anything is timed (see run_check): per pattern kind and a few small
lengths, the dense reference mask (built from the same derived index lists, by the plain definition), the tile
counts, the BlockMask's effective pairs and the mask_mod agree pair for pair, and flex's output (fp32) matches
an fp64 masked-softmax reference within --check-tolerance x max |O|.

Needs torch (>= 2.6) and the fulcrum module (PYTHONPATH=build/dev/python, or bench/gpu_torch_check.sh's build).
On cuda each (mask kind, length) compiles once (the patterns of a kind share one mask_mod whose buffers are
refilled in place): 2 kinds x 6 lengths for the example report, plus 4 for --check. Example (an H200; the
report's 6 distinct patterns: full + 5 vertical-slash budget classes):
  python3 bench/gpu_head_profile.py --patterns data/heads/llama3-8b-262k-minference.json --layers 1 \\
      --prompt-tokens 16384,32768,65536,131072,262144,524288 --dtype bf16 --device cuda --repeats 5 \\
      --check --extrapolate --out h200-heads-profile.json --details h200-heads-details.json
"""

from __future__ import annotations

import argparse
import functools
import inspect
import json
import math
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

import fulcrum

MAX_PATTERN_TOKENS = 1 << 24  # heads::kMaxPatternTokens
MAX_BLOCK_TOKENS = 65536  # heads::kMaxBlockTokens
TILE = 128  # flex_attention's sparse block size (both sides)
KINDS = ("full", "a-shape", "vertical-slash", "block-sparse")

# ----------------------------------------------------------------------------------------------------------------
# Head patterns (src/fulcrum/planners/heads/patterns.{hpp,cpp}).


@dataclass(frozen=True)
class HeadPattern:
    kind: str = "full"
    sink: int = 0
    window: int = 0
    verticals: int = 0
    slashes: int = 0
    block: int = 0
    blocks: int = 0
    density: float = 0.0

    def key(self) -> str:
        """HeadPattern::key ("full", "a-shape:S:W", "vertical-slash:V:S", "block-sparse:B:blocks=K|density=P")."""
        if self.kind == "full":
            return "full"
        if self.kind == "a-shape":
            return f"a-shape:{self.sink}:{self.window}"
        if self.kind == "vertical-slash":
            return f"vertical-slash:{self.verticals}:{self.slashes}"
        if self.blocks > 0:
            return f"block-sparse:{self.block}:blocks={self.blocks}"
        return f"block-sparse:{self.block}:density={self.density:g}"  # fmt's {:g} is printf's %g, as Python's

    def validate(self, where: str) -> None:
        def check(name: str, value: int, lo: int, hi: int) -> None:
            if not lo <= value <= hi:
                raise ValueError(f"{where}.{name} = {value}: must be in [{lo}, {hi}]")

        if self.kind not in KINDS:
            raise ValueError(f"{where}.kind = '{self.kind}': unknown; choose from {', '.join(KINDS)}")
        if self.kind == "a-shape":
            check("sink", self.sink, 0, MAX_PATTERN_TOKENS)
            check("window", self.window, 1, MAX_PATTERN_TOKENS)
        elif self.kind == "vertical-slash":
            check("verticals", self.verticals, 0, MAX_PATTERN_TOKENS)
            check("slashes", self.slashes, 1, MAX_PATTERN_TOKENS)
        elif self.kind == "block-sparse":
            check("block", self.block, 1, MAX_BLOCK_TOKENS)
            if (self.blocks > 0) == (self.density > 0):
                raise ValueError(f"{where}: block-sparse takes exactly one of blocks and density")
            if self.blocks > 0:
                check("blocks", self.blocks, 1, MAX_PATTERN_TOKENS)
            elif not 0 < self.density <= 1:
                raise ValueError(f"{where}.density = {self.density}: must be in (0, 1]")

    @staticmethod
    def parse(key: str) -> HeadPattern:
        """HeadPattern::parse (a pattern key back to its pattern)."""
        fields = key.split(":")
        kind = fields[0]
        expected = 1 if kind == "full" else 3
        if kind not in KINDS or len(fields) != expected:
            raise ValueError(f"pattern '{key}': expected full | a-shape:S:W | vertical-slash:V:S | block-sparse:B:...")
        if kind == "full":
            p = HeadPattern()
        elif kind == "a-shape":
            p = HeadPattern(kind, sink=int(fields[1]), window=int(fields[2]))
        elif kind == "vertical-slash":
            p = HeadPattern(kind, verticals=int(fields[1]), slashes=int(fields[2]))
        elif fields[2].startswith("blocks="):
            p = HeadPattern(kind, block=int(fields[1]), blocks=int(fields[2][7:]))
        elif fields[2].startswith("density="):
            p = HeadPattern(kind, block=int(fields[1]), density=float(fields[2][8:]))
        else:
            raise ValueError(f"pattern '{key}': third field must be blocks=K or density=P")
        p.validate(f"pattern '{key}'")
        return p

    @staticmethod
    def from_json(h: dict[str, Any], where: str) -> HeadPattern:
        kind = h.get("kind")
        allowed = {
            "full": {"kind"},
            "a-shape": {"kind", "sink", "window"},
            "vertical-slash": {"kind", "verticals", "slashes"},
            "block-sparse": {"kind", "block", "blocks", "density"},
        }
        if not isinstance(kind, str) or kind not in allowed:
            raise ValueError(f"{where}.kind = {kind!r}: unknown; choose from {', '.join(KINDS)}")
        extra = set(h) - allowed[kind]
        if extra:
            raise ValueError(f"{where}: unexpected {', '.join(sorted(extra))} for kind {kind}")

        def integer(name: str) -> int:
            v = h.get(name, 0)
            if not isinstance(v, int) or isinstance(v, bool):
                raise ValueError(f"{where}.{name} = {v!r}: must be a whole number")
            return v

        density = h.get("density", 0.0)
        if not isinstance(density, (int, float)) or isinstance(density, bool):
            raise ValueError(f"{where}.density = {density!r}: must be a number")
        p = HeadPattern(kind, integer("sink"), integer("window"), integer("verticals"), integer("slashes"),
                        integer("block"), integer("blocks"), float(density))
        p.validate(where)
        return p


def read_report(path: str) -> list[list[HeadPattern]]:
    """A head pattern report's layers (patterns.hpp's JSON format), validated as head_patterns_from_json does."""
    root = json.loads(Path(path).read_text())
    q_heads, kv_heads = root.get("q_heads"), root.get("kv_heads")
    if not isinstance(q_heads, int) or not isinstance(kv_heads, int) or kv_heads < 1 or q_heads % kv_heads:
        raise ValueError(f"{path}: q_heads and kv_heads must be whole numbers, kv_heads dividing q_heads")
    layers = root.get("layers")
    if not isinstance(layers, list) or not layers:
        raise ValueError(f"{path}: layers must be an array of at least one layer")
    out = []
    for li, layer in enumerate(layers):
        heads = layer.get("heads") if isinstance(layer, dict) else None
        if not isinstance(heads, list) or len(heads) != q_heads:
            raise ValueError(f"{path}: layers[{li}].heads must be an array of q_heads = {q_heads} heads")
        out.append([HeadPattern.from_json(h, f"{path}: layers[{li}].heads[{hi}]") for hi, h in enumerate(heads)])
    return out


def profiled_patterns(layers: Sequence[Sequence[HeadPattern]], count: int | None) -> list[HeadPattern]:
    """`full` and the distinct patterns (by key) of the first `count` layers, first-seen order (profiled_patterns)."""
    n = len(layers) if count is None else count
    if not 0 <= n <= len(layers):
        raise ValueError(f"layers = {n}: the report has {len(layers)}")
    out, seen = [HeadPattern()], {"full"}
    for layer in layers[:n]:
        for p in layer:
            if p.key() not in seen:
                seen.add(p.key())
                out.append(p)
    return out


@dataclass
class HeadMask:
    """heads::to_mask's MaskSpec as plain lists: 'causal', 'lambda' (sink, window), 'vslash' (verticals,
    slashes: sorted, distinct, < T) or 'blocksparse' (block, pairs (qb, kb) with kb <= qb, sorted, distinct)."""

    kind: str
    sink: int = 0
    window: int = 0
    verticals: list[int] = field(default_factory=list)
    slashes: list[int] = field(default_factory=list)
    block: int = 0
    pairs_q: list[int] = field(default_factory=list)
    pairs_k: list[int] = field(default_factory=list)


def to_mask(p: HeadPattern, prompt_len: int, seed: int) -> HeadMask:
    """The mask one head runs over a prompt of prompt_len tokens: heads::to_mask itself (patterns.cpp, through
    fulcrum.head_pattern_mask), read from its canonical text into lists."""
    kind, *fields = str(fulcrum.head_pattern_mask(p.key(), prompt_len, seed)).split(":")

    def numbers(text: str) -> list[int]:
        return [int(x) for x in text.split(",") if x]

    if kind == "causal":
        return HeadMask("causal")
    if kind == "lambda":
        return HeadMask("lambda", sink=int(fields[0]), window=int(fields[1]))
    if kind == "vslash":
        return HeadMask("vslash", verticals=numbers(fields[0]), slashes=numbers(fields[1]))
    assert kind == "blocksparse", kind
    pairs = [tuple(int(x) for x in pair.split("-")) for pair in fields[1].split(",") if pair]
    return HeadMask("blocksparse", block=int(fields[0]), pairs_q=[q for q, _ in pairs], pairs_k=[k for _, k in pairs])


# ----------------------------------------------------------------------------------------------------------------
# Exact kept-pair counts per flex tile (TILE x TILE), O(tiles + list sizes), never O(T^2).


def _clamped_prefix_sum(n: torch.Tensor, width: torch.Tensor) -> torch.Tensor:
    """Σ_{x=0}^{n-1} clamp(x, 0, width) (mask.cpp clamped_prefix_sum), elementwise."""
    n = n.clamp(min=0)
    small = n * (n - 1) // 2
    big = width * (width + 1) // 2 + (n - width - 1) * width
    return torch.where(n <= width + 1, small, big)


def band_pairs(q0: torch.Tensor, q1: torch.Tensor, k0: torch.Tensor, k1: torch.Tensor, c: int) -> torch.Tensor:
    """Pairs (q, k) in [q0, q1) x [k0, k1) with k <= q + c (mask.cpp band_pairs), elementwise, broadcasting."""
    width = (k1 - k0).clamp(min=0)
    got = _clamped_prefix_sum(q1 + c + 1 - k0, width) - _clamped_prefix_sum(q0 + c + 1 - k0, width)
    return torch.where((q1 > q0) & (k1 > k0), got, torch.zeros_like(got))


def tile_ranges(length: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    starts = torch.arange(0, length, TILE, device=device, dtype=torch.int64)
    return starts, (starts + TILE).clamp(max=length)


def tile_counts(m: HeadMask, length: int, device: torch.device) -> torch.Tensor:
    """int64 [tiles, tiles]: how many pairs of each TILE x TILE tile (query tile, key tile) the mask keeps."""
    nt = (length + TILE - 1) // TILE
    starts, ends = tile_ranges(length, device)
    qs, qe, ks, ke = starts[:, None], ends[:, None], starts[None, :], ends[None, :]
    if m.kind == "causal":
        return band_pairs(qs, qe, ks, ke, 0)
    if m.kind == "lambda":
        # Window pairs, plus sink keys the window no longer covers (mask.cpp count_pairs, kLambda).
        sink_end = torch.minimum(ke, torch.full_like(ke, m.sink))
        return band_pairs(qs, qe, ks, ke, 0) - band_pairs(qs, qe, ks, ke, -m.window) + band_pairs(
            qs, qe, ks, sink_end, -m.window)
    if m.kind == "vslash":
        return _vslash_tile_counts(m, length, nt, starts, ends, device)
    if m.kind == "blocksparse":
        return _blocksparse_tile_counts(m, length, nt, device)
    raise ValueError(m.kind)


def _vslash_tile_counts(m: HeadMask, length: int, nt: int, starts: torch.Tensor, ends: torch.Tensor,
                        device: torch.device) -> torch.Tensor:
    # Pairs of V or S per tile = V pairs + S pairs - pairs in both. Row q sees column v iff v <= q, diagonal s iff
    # s <= q.
    i64 = torch.int64
    v = torch.tensor(m.verticals, dtype=i64, device=device)
    s = torch.tensor(m.slashes, dtype=i64, device=device)
    tq = torch.arange(nt, device=device)[:, None]
    tk = torch.arange(nt, device=device)[None, :]
    rows = (ends - starts)[:, None]
    # Columns: every row of a tile below the column's tile; on the diagonal tile, rows v..end.
    n_v = torch.zeros(nt, dtype=i64, device=device).scatter_add_(0, v // TILE, torch.ones_like(v))
    diag_v = torch.zeros(nt, dtype=i64, device=device).scatter_add_(0, v // TILE, ends[v // TILE] - v)
    counts = torch.where(tq > tk, n_v[None, :] * rows, torch.zeros((), dtype=i64, device=device))
    counts += torch.diag(diag_v)
    # Diagonals: in a whole TILE x TILE tile at tile offset d = tq - tk, diagonal s = d0 * TILE + r adds
    # TILE - r pairs at d = d0 and r at d = d0 + 1. Only the last query row of tiles can be cut short.
    by_offset = torch.zeros(nt + 1, dtype=i64, device=device)
    by_offset.scatter_add_(0, s // TILE, TILE - s % TILE)
    by_offset.scatter_add_(0, s // TILE + 1, s % TILE)
    d = tq - tk
    counts += torch.where(d >= 0, by_offset[d.clamp(min=0, max=nt)], torch.zeros((), dtype=i64, device=device))
    if length % TILE:
        last_q = torch.arange(int(starts[-1]), length, device=device, dtype=i64)
        k = last_q[:, None] - s[None, :]
        k = k[k >= 0]
        last_row = torch.zeros(nt, dtype=i64, device=device).scatter_add_(0, k // TILE, torch.ones_like(k))
        counts[nt - 1] += last_row - by_offset[nt - 1 - tk[0]]  # the last row's exact diagonal pairs
    # Pairs on both a column and a diagonal: (v + s, v) with v + s < T.
    flat = torch.zeros(nt * nt, dtype=i64, device=device)
    chunk = max(1, (1 << 22) // max(1, len(m.slashes)))
    for c0 in range(0, len(m.verticals), chunk):
        vc = v[c0 : c0 + chunk, None]
        q = vc + s[None, :]
        keep = q < length
        q, kk = q[keep], vc.expand_as(keep)[keep]
        flat.scatter_add_(0, (q // TILE) * nt + kk // TILE, torch.ones_like(q))
    return counts - flat.view(nt, nt)


def _blocksparse_tile_counts(m: HeadMask, length: int, nt: int, device: torch.device) -> torch.Tensor:
    # Each listed block pair is the rectangle [qb B, (qb+1) B) x [kb B, (kb+1) B) cut to the prompt and to k <= q;
    # it spans at most `span` tiles a side. Count its pairs in each tile it touches.
    i64 = torch.int64
    b = m.block
    span = (b - 1) // TILE + 2
    off = torch.arange(span, device=device, dtype=i64)
    flat = torch.zeros(nt * nt, dtype=i64, device=device)
    chunk = max(1, (1 << 22) // (span * span))
    for c0 in range(0, len(m.pairs_q), chunk):
        pq = torch.tensor(m.pairs_q[c0 : c0 + chunk], dtype=i64, device=device)
        pk = torch.tensor(m.pairs_k[c0 : c0 + chunk], dtype=i64, device=device)
        q0, q1 = pq * b, ((pq + 1) * b).clamp(max=length)
        k0, k1 = pk * b, ((pk + 1) * b).clamp(max=length)
        tq = (q0 // TILE)[:, None, None] + off[None, :, None]  # [pairs, span, 1]
        tk = (k0 // TILE)[:, None, None] + off[None, None, :]  # [pairs, 1, span]
        rq0 = torch.maximum(q0[:, None, None], tq * TILE)
        rq1 = torch.minimum(q1[:, None, None], (tq + 1) * TILE)
        rk0 = torch.maximum(k0[:, None, None], tk * TILE)
        rk1 = torch.minimum(k1[:, None, None], (tk + 1) * TILE)
        got = band_pairs(rq0, rq1, rk0, rk1, 0)
        tq, tk = tq.expand_as(got), tk.expand_as(got)
        valid = (got > 0) & (tq < nt) & (tk < nt)
        flat.scatter_add_(0, tq[valid] * nt + tk[valid], got[valid])
    return flat.view(nt, nt)


def dense_mask(m: HeadMask, length: int) -> torch.Tensor:
    """bool [T, T] by the plain definition (MaskSpec::allows); the reference of --check, small T only."""
    q = torch.arange(length)[:, None]
    k = torch.arange(length)[None, :]
    causal = k <= q
    if m.kind == "causal":
        return causal
    if m.kind == "lambda":
        return causal & ((k < m.sink) | (k > q - m.window))
    out = torch.zeros(length, length, dtype=torch.bool)
    if m.kind == "vslash":
        out[:, m.verticals] = True
        for s in m.slashes:
            out.diagonal(-s).fill_(True)
        return out & causal
    for qb, kb in zip(m.pairs_q, m.pairs_k, strict=True):
        out[qb * m.block : (qb + 1) * m.block, kb * m.block : (kb + 1) * m.block] = True
    return out & causal


# ----------------------------------------------------------------------------------------------------------------
# flex_attention inputs: one mask_mod per (kind, T, table shape) reading buffers that each pattern overwrites in
# place, so torch.compile sees the same function and tensor shapes for every pattern of a kind at a length.

MaskMod = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass
class MaskModSlot:
    mask_mod: MaskMod
    buffers: list[torch.Tensor]


class MaskMods:
    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.slots: dict[tuple[Any, ...], MaskModSlot] = {}

    def get(self, m: HeadMask, length: int) -> MaskMod:
        dev = self.device
        if m.kind == "causal":
            key: tuple[Any, ...] = ("causal",)
        elif m.kind == "lambda":
            key = ("lambda",)
        elif m.kind == "vslash":
            key = ("vslash", length)
        else:
            rows = (length + m.block - 1) // m.block
            if rows * rows > 1 << 30:
                raise ValueError(f"block-sparse block {m.block} at {length} tokens: block table too large")
            key = ("blocksparse", length, m.block)
        slot = self.slots.get(key)
        if slot is None:
            slot = self._make(m, length, dev)
            self.slots[key] = slot
        self._fill(slot, m, length)
        return slot.mask_mod

    @staticmethod
    def _make(m: HeadMask, length: int, dev: torch.device) -> MaskModSlot:
        if m.kind == "causal":

            def causal(b: torch.Tensor, h: torch.Tensor, q: torch.Tensor, kv: torch.Tensor) -> torch.Tensor:
                return kv <= q

            return MaskModSlot(causal, [])
        if m.kind == "lambda":
            params = torch.zeros(2, dtype=torch.int64, device=dev)  # sink, window

            def lambda_mask(b: torch.Tensor, h: torch.Tensor, q: torch.Tensor, kv: torch.Tensor) -> torch.Tensor:
                return (kv <= q) & ((kv < params[0]) | (q - kv < params[1]))

            return MaskModSlot(lambda_mask, [params])
        if m.kind == "vslash":
            vert = torch.zeros(length, dtype=torch.bool, device=dev)
            slash = torch.zeros(length, dtype=torch.bool, device=dev)

            def vslash(b: torch.Tensor, h: torch.Tensor, q: torch.Tensor, kv: torch.Tensor) -> torch.Tensor:
                return (kv <= q) & (vert[kv] | slash[(q - kv).clamp(min=0)])

            return MaskModSlot(vslash, [vert, slash])
        block = m.block
        rows = (length + block - 1) // block
        table = torch.zeros(rows, rows, dtype=torch.bool, device=dev)

        def blocksparse(b: torch.Tensor, h: torch.Tensor, q: torch.Tensor, kv: torch.Tensor) -> torch.Tensor:
            return (kv <= q) & table[q // block, kv // block]

        return MaskModSlot(blocksparse, [table])

    def _fill(self, slot: MaskModSlot, m: HeadMask, length: int) -> None:
        dev = self.device
        if m.kind == "lambda":
            slot.buffers[0].copy_(torch.tensor([m.sink, m.window], dtype=torch.int64))
        elif m.kind == "vslash":
            vert, slash = slot.buffers
            vert.zero_()
            slash.zero_()
            vert[torch.tensor(m.verticals, dtype=torch.int64, device=dev)] = True
            slash[torch.tensor(m.slashes, dtype=torch.int64, device=dev)] = True
        elif m.kind == "blocksparse":
            table = slot.buffers[0]
            table.zero_()
            table[torch.tensor(m.pairs_q, dtype=torch.int64, device=dev),
                  torch.tensor(m.pairs_k, dtype=torch.int64, device=dev)] = True


@dataclass
class BuiltMask:
    block_mask: Any  # torch.nn.attention.flex_attention.BlockMask
    pairs: int
    partial_tiles: int
    full_tiles: int
    counts: torch.Tensor


def build_block_mask(m: HeadMask, length: int, mods: MaskMods) -> BuiltMask:
    from torch.nn.attention.flex_attention import BlockMask

    dev = mods.device
    counts = tile_counts(m, length, dev)
    starts, ends = tile_ranges(length, dev)
    area = (ends - starts)[:, None] * (ends - starts)[None, :]
    full = counts == area
    partial = (counts > 0) & ~full
    if bool((counts < 0).any()) or bool((counts > area).any()):
        raise AssertionError("tile counts out of range: a bug in tile_counts")

    def lists(tiles: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        num = tiles.sum(-1, dtype=torch.int32)[None, None]
        idx = torch.argsort((~tiles).to(torch.int8), dim=-1, stable=True).to(torch.int32)[None, None]
        return num, idx

    kv_num, kv_idx = lists(partial)
    full_num, full_idx = lists(full)
    kwargs: dict[str, Any] = {
        "full_kv_num_blocks": full_num,
        "full_kv_indices": full_idx,
        "BLOCK_SIZE": TILE,
        "mask_mod": mods.get(m, length),
        "seq_lengths": (length, length),
    }
    accepted = inspect.signature(BlockMask.from_kv_blocks).parameters
    block_mask = BlockMask.from_kv_blocks(kv_num, kv_idx, **{k: v for k, v in kwargs.items() if k in accepted})
    return BuiltMask(block_mask, int(counts.sum()), int(partial.sum()), int(full.sum()), counts)


# ----------------------------------------------------------------------------------------------------------------
# Kernels and timing.


def _raise_compile_limits() -> None:
    import torch._dynamo.config as dynamo_config

    # One compiled graph per (mask kind, length): more than the default 8 recompiles; never fall back to eager.
    for name, value in (("cache_size_limit", 1024), ("recompile_limit", 1024), ("accumulated_cache_size_limit", 4096),
                        ("accumulated_recompile_limit", 4096), ("fail_on_recompile_limit_hit", True),
                        ("fail_on_cache_limit_hit", True)):
        if hasattr(dynamo_config, name):
            setattr(dynamo_config, name, value)


class Flex:
    def __init__(self, device: torch.device, compile_flex: bool) -> None:
        import warnings

        from torch.nn.attention.flex_attention import flex_attention

        self.compiled = compile_flex
        if compile_flex:
            _raise_compile_limits()
            self.fn: Callable[..., Any] = torch.compile(flex_attention, dynamic=False)
        else:
            warnings.filterwarnings("ignore", message=".*flex_attention called without torch.compile.*")
            self.fn = flex_attention

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_mask: Any) -> torch.Tensor:
        out = self.fn(q, k, v, block_mask=block_mask)
        assert isinstance(out, torch.Tensor)
        return out


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def median_time(fn: Callable[[], object], repeats: int, warmups: int, device: torch.device) -> tuple[float, float]:
    """(median seconds of `repeats` runs after `warmups` runs, seconds of the first warm-up run)."""
    sync(device)
    start0 = time.perf_counter()
    fn()
    sync(device)
    first = time.perf_counter() - start0
    for _ in range(warmups - 1):
        fn()
    sync(device)
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            begin = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
            end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
            begin.record()
            fn()
            end.record()
            end.synchronize()
            times.append(begin.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return statistics.median(times), first


def uniform(shape: Sequence[int], dtype: torch.dtype, device: torch.device, gen: torch.Generator) -> torch.Tensor:
    return (torch.rand(*shape, generator=gen, device=device, dtype=torch.float32) * 2 - 1).to(dtype)


def projection_times(t: int, d: int, hidden: int, dtype: torch.dtype, device: torch.device, repeats: int,
                     warmups: int, gen: torch.Generator) -> tuple[float, float]:
    """(t_qo, t_qkvo) as head_profile.cpp projection_times: Q, K, V each x[t][hidden]·W[d][hidden]ᵀ, O as
    o[t][d]·W[d][hidden]; each GEMM timed on its own."""
    x = uniform((t, hidden), dtype, device, gen)
    w = uniform((d, hidden), dtype, device, gen)
    o = uniform((t, d), dtype, device, gen)
    out = torch.empty(t, d, dtype=dtype, device=device)
    partial = torch.empty(t, hidden, dtype=dtype, device=device)
    wt = w.t()

    def in_projection() -> float:
        return median_time(lambda: torch.matmul(x, wt, out=out), repeats, warmups, device)[0]

    q_s, k_s, v_s = in_projection(), in_projection(), in_projection()
    o_s = median_time(lambda: torch.matmul(o, w, out=partial), repeats, warmups, device)[0]
    return q_s + o_s, q_s + k_s + v_s + o_s


# ----------------------------------------------------------------------------------------------------------------
# --check


CHECK_KEYS = [
    ("full", False),
    ("a-shape:4:64", False),
    ("a-shape:0:1", True),
    ("a-shape:300:100", True),
    ("vertical-slash:30:80", False),
    ("vertical-slash:400:600", False),  # budgets above half the range left: the complement sampler
    ("vertical-slash:4000:3", True),  # budget above T: cut to T
    ("block-sparse:64:blocks=3", False),
    ("block-sparse:64:density=0.3", False),
    ("block-sparse:48:density=0.5", True),  # blocks straddling tiles
    ("block-sparse:200:density=1", True),
    ("block-sparse:16:blocks=1000", True),
]


def check_lengths(seed: int, count: int) -> list[int]:
    """Lengths in [256, 1024] that are not multiples of 16 (nor of any check pattern's block), plus 640 = 5 x 128."""
    r = random.Random(seed)
    out = {640}
    while len(out) < count + 1:
        t = r.randint(256, 1024)
        if t % 16:
            out.add(t)
    return sorted(out)


def reference_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """fp64 softmax(q kᵀ / sqrt(d) masked) v; q, k, v [T, d] (no flex, no SDPA)."""
    q64, k64, v64 = q.double(), k.double(), v.double()
    scores = (q64 @ k64.t()) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v64


def effective_pairs(built: BuiltMask, length: int, mask_mod: MaskMod, device: torch.device) -> torch.Tensor:
    """bool [T, T]: the pairs a fused flex kernel computes from the BlockMask's own index tensors: every pair of a
    full tile, the mask_mod's pairs of a partial tile, nothing elsewhere."""
    bm = built.block_mask
    nt = (length + TILE - 1) // TILE
    full = torch.zeros(nt, nt, dtype=torch.bool)
    part = torch.zeros(nt, nt, dtype=torch.bool)
    for tiles, num, idx in ((part, bm.kv_num_blocks, bm.kv_indices), (full, bm.full_kv_num_blocks, bm.full_kv_indices)):
        num_c, idx_c = num[0, 0].cpu(), idx[0, 0].cpu()
        for row in range(nt):
            tiles[row, idx_c[row, : int(num_c[row])].long()] = True
    if bool((full & part).any()):
        raise AssertionError("a tile listed both full and partial")
    expand = torch.ones(TILE, TILE, dtype=torch.bool)
    full_d = torch.kron(full, expand)[:length, :length]
    part_d = torch.kron(part, expand)[:length, :length]
    return full_d | (part_d & dense_mod(mask_mod, length, device))


def dense_mod(mask_mod: MaskMod, length: int, device: torch.device) -> torch.Tensor:
    idx = torch.arange(length, device=device)
    zero = torch.zeros((), dtype=torch.int64, device=device)
    return mask_mod(zero, zero, idx[:, None], idx[None, :]).expand(length, length).cpu()


def run_check(device: torch.device, lengths: Sequence[int], seed: int, tolerance: float, compile_flex: bool,
              log: Callable[[str], None]) -> dict[tuple[str, int], int]:
    """Checks every check pattern at every length; returns the kept pairs per (key, T). Raises AssertionError."""
    flex = Flex(device, compile_flex)
    mods = MaskMods(device)
    cpu_mods = MaskMods(torch.device("cpu"))
    pairs: dict[tuple[str, int], int] = {}
    gen = torch.Generator(device=device).manual_seed(seed)
    for length in lengths:
        q, k, v = (uniform((1, 1, length, 64), torch.float32, device, gen) for _ in range(3))
        for key, cpu_only in CHECK_KEYS:
            if cpu_only and device.type != "cpu":
                continue
            pattern = HeadPattern.parse(key)
            m = to_mask(pattern, length, fulcrum.head_mask_seed(seed, 0, 0))
            dense = dense_mask(m, length)
            kept = int(dense.sum())
            where = f"check {key} at T={length}"
            # 1. Tile counts (what the BlockMask is built from) against the dense reference, tile by tile.
            built_cpu = build_block_mask(m, length, cpu_mods)
            nt = (length + TILE - 1) // TILE
            padded = torch.zeros(nt * TILE, nt * TILE, dtype=torch.int64)
            padded[:length, :length] = dense.long()
            per_tile = padded.view(nt, TILE, nt, TILE).sum(dim=(1, 3))
            if not torch.equal(per_tile, built_cpu.counts):
                raise AssertionError(f"{where}: tile counts differ from the dense mask's")
            # 2. The token-level mask_mod, and the pairs the BlockMask makes a fused kernel compute.
            mod_cpu = cpu_mods.get(m, length)
            if not torch.equal(dense_mod(mod_cpu, length, torch.device("cpu")), dense):
                raise AssertionError(f"{where}: mask_mod differs from the dense mask")
            if not torch.equal(effective_pairs(built_cpu, length, mod_cpu, torch.device("cpu")), dense):
                raise AssertionError(f"{where}: BlockMask's effective pairs differ from the dense mask")
            # 3. flex_attention (as profiled: compiled on cuda) against an fp64 masked softmax.
            built = build_block_mask(m, length, mods) if device.type != "cpu" else built_cpu
            if device.type != "cpu":  # the device's BlockMask and mask_mod too (buffers refilled per pattern)
                mod = mods.get(m, length)
                if not torch.equal(dense_mod(mod, length, device), dense):
                    raise AssertionError(f"{where}: device mask_mod differs from the dense mask")
                if not torch.equal(effective_pairs(built, length, mod, device), dense):
                    raise AssertionError(f"{where}: device BlockMask's effective pairs differ from the dense mask")
            out = flex(q, k, v, built.block_mask)[0, 0].double().cpu()
            ref = reference_attention(q[0, 0].cpu(), k[0, 0].cpu(), v[0, 0].cpu(), dense)
            err = float((out - ref).abs().max()) / float(ref.abs().max())
            if not err <= tolerance:
                raise AssertionError(f"{where}: flex output error {err:.3g} x max|O| > tolerance {tolerance:g}")
            pairs[(key, length)] = kept
            log(f"{where}: ok ({kept} pairs, {built.partial_tiles} partial + {built.full_tiles} full tiles, "
                f"error {err:.2g} x max|O|)")
    return pairs


# ----------------------------------------------------------------------------------------------------------------
# The profile.


@dataclass
class Options:
    patterns: list[HeadPattern]
    prompt_tokens: list[int]
    head_dim: int = 128
    hidden: int = 4096
    repeats: int = 5
    dtype: str = "bf16"
    device: str = "cuda"
    seed: int = 1
    extrapolate: bool = False
    full_kernel: str = "flex"
    compile: bool | None = None  # None: on cuda only


def validate(o: Options) -> None:
    if not 1 <= o.head_dim <= 1024:
        raise ValueError(f"head_dim = {o.head_dim}: must be in [1, 1024]")
    if not 1 <= o.hidden <= 65536:
        raise ValueError(f"hidden = {o.hidden}: must be in [1, 65536]")
    if not o.prompt_tokens:
        raise ValueError("prompt tokens: give at least one length")
    for i, t in enumerate(o.prompt_tokens):
        if not 1 <= t <= MAX_PATTERN_TOKENS:
            raise ValueError(f"prompt tokens[{i}] = {t}: must be in [1, {MAX_PATTERN_TOKENS}]")
        if i and t <= o.prompt_tokens[i - 1]:
            raise ValueError(f"prompt tokens[{i}] = {t}: must be larger than the length before it")
    if o.extrapolate and len(o.prompt_tokens) < 2:
        raise ValueError("extrapolate: needs at least two prompt lengths")
    if not 1 <= o.repeats <= 1000:
        raise ValueError(f"repeats = {o.repeats}: must be in [1, 1000]")


DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}


def profile(
    o: Options,
    log: Callable[[str], None],
    on_length: Callable[[dict[str, Any], list[dict[str, Any]]], None] | None = None,
) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, list[float]]]:
    """(RuntimeProfile JSON, per-cell details, informational rows). Mask building is untimed. `on_length` gets the
    profile of the lengths measured so far (and the details) after each length."""
    validate(o)
    device = torch.device(o.device)
    dtype = DTYPES[o.dtype]
    compile_flex = device.type == "cuda" if o.compile is None else o.compile
    flex = Flex(device, compile_flex)
    mods = MaskMods(device)
    warmups = 2 if device.type == "cuda" else 1
    gen = torch.Generator(device=device).manual_seed(o.seed)
    mask_seed = fulcrum.head_mask_seed(o.seed, 0, 0)
    qo_s: list[float] = []
    qkvo_s: list[float] = []
    attention: dict[str, list[float]] = {p.key(): [] for p in o.patterns}
    extra: dict[str, list[float]] = {}
    details: list[dict[str, Any]] = []
    total = len(o.prompt_tokens) * (len(o.patterns) + 1)
    done = 0
    start = time.perf_counter()
    for t in o.prompt_tokens:
        qo, qkvo = projection_times(t, o.head_dim, o.hidden, dtype, device, o.repeats, warmups, gen)
        qo_s.append(qo)
        qkvo_s.append(qkvo)
        done += 1
        log(f"[{done}/{total}] T={t} projections: t_qo {qo * 1e3:.3f} ms, t_qkvo {qkvo * 1e3:.3f} ms "
            f"({time.perf_counter() - start:.0f} s)")
        if device.type == "cuda":
            torch.cuda.empty_cache()
        q, k, v = (uniform((1, 1, t, o.head_dim), dtype, device, gen) for _ in range(3))
        causal_pairs = t * (t + 1) // 2
        for p in o.patterns:
            key = p.key()
            t0 = time.perf_counter()
            run: Callable[[], object]
            if key == "full" and o.full_kernel == "sdpa":
                pairs, partial_tiles, full_tiles = causal_pairs, -1, -1
                run = functools.partial(F.scaled_dot_product_attention, q, k, v, is_causal=True)
            else:
                built = build_block_mask(to_mask(p, t, mask_seed), t, mods)
                pairs, partial_tiles, full_tiles = built.pairs, built.partial_tiles, built.full_tiles
                run = functools.partial(flex, q, k, v, built.block_mask)

            sync(device)
            build_s = time.perf_counter() - t0
            seconds, first = median_time(run, o.repeats, warmups, device)
            attention[key].append(seconds)
            done += 1
            tflops = 4 * o.head_dim * pairs / seconds / 1e12
            details.append({"prompt_tokens": t, "pattern": key, "seconds": seconds, "pairs": pairs,
                            "pair_share_of_causal": pairs / causal_pairs, "partial_tiles": partial_tiles,
                            "full_tiles": full_tiles, "mask_build_s": build_s, "first_call_s": first})
            log(f"[{done}/{total}] T={t} {key}: {seconds * 1e3:.3f} ms ({pairs / causal_pairs:.4f} of causal pairs, "
                f"{partial_tiles} partial + {full_tiles} full tiles, {tflops:.1f} TFLOP/s on kept pairs; "
                f"mask {build_s:.2f} s, first call {first:.2f} s; {time.perf_counter() - start:.0f} s)")
        if device.type == "cuda" and o.full_kernel == "flex" and any(p.kind == "full" for p in o.patterns):
            sdpa = functools.partial(F.scaled_dot_product_attention, q, k, v, is_causal=True)
            seconds, _ = median_time(sdpa, o.repeats, warmups, device)
            extra.setdefault("full [sdpa is_causal; not in JSON]", []).append(seconds)
        del q, k, v
        if device.type == "cuda":
            torch.cuda.empty_cache()
        if on_length is not None:  # the lengths done so far: a valid profile if the run is cut short
            done_lengths = len(qo_s)
            on_length(result_json(o, device, compile_flex, warmups, o.prompt_tokens[:done_lengths], qkvo_s, qo_s,
                                  attention, o.extrapolate and done_lengths >= 2), details)
    result = result_json(o, device, compile_flex, warmups, o.prompt_tokens, qkvo_s, qo_s, attention, o.extrapolate)
    return result, details, extra


def result_json(o: Options, device: torch.device, compile_flex: bool, warmups: int, prompt_tokens: list[int],
                qkvo_s: list[float], qo_s: list[float], attention: dict[str, list[float]],
                extrapolate: bool) -> dict[str, Any]:
    """The RuntimeProfile JSON (cost_model.hpp): only the keys RuntimeProfile::from_json accepts."""
    if device.type == "cuda":
        where = f"cuda: {torch.cuda.get_device_name(device)}"
    else:
        where = f"cpu: {torch.get_num_threads()} threads"
    kernel = "torch.compile(flex_attention)" if compile_flex else "eager flex_attention"
    full_how = "F.scaled_dot_product_attention(is_causal=True)" if o.full_kernel == "sdpa" else "flex (causal)"
    device_text = (f"{where}, torch {torch.__version__}, {o.dtype}, {kernel} with a {TILE}x{TILE} BlockMask "
                   f"(mask build untimed), full: {full_how}, head_dim {o.head_dim}, hidden {o.hidden}, "
                   f"median of {o.repeats} after {warmups} warm-up{'s' if warmups > 1 else ''}, mask seed {o.seed}")
    return {
        "device": device_text,
        "prompt_tokens": list(prompt_tokens),
        "extrapolate": extrapolate,
        "t_qkvo_s": list(qkvo_s),
        "t_qo_s": list(qo_s),
        "attention_s": {key: list(values) for key, values in attention.items()},
    }


def table(result: dict[str, Any], extra: dict[str, list[float]]) -> str:
    header = ["ms per head \\ prompt tokens"] + [str(t) for t in result["prompt_tokens"]]
    rows = [["t_qkvo"] + [f"{x * 1e3:.3f}" for x in result["t_qkvo_s"]],
            ["t_qo"] + [f"{x * 1e3:.3f}" for x in result["t_qo_s"]]]
    rows += [[key] + [f"{x * 1e3:.3f}" for x in values] for key, values in result["attention_s"].items()]
    rows += [[key] + [f"{x * 1e3:.3f}" for x in values] for key, values in extra.items()]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = []
    for r in [header, *rows]:
        cells = [r[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(r[1:], widths[1:], strict=True)]
        lines.append("  ".join(cells))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--patterns", help="head pattern report (JSON); profiles full + its distinct patterns")
    ap.add_argument("--layers", type=int, default=None, help="the report's first N layers (default: all)")
    ap.add_argument("--prompt-tokens", default="16384,32768,65536,131072,262144,524288")
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    ap.add_argument("--device", default="cuda", help="cuda | cpu (or cuda:N)")
    ap.add_argument("--seed", type=int, default=1, help="data and masks' scattered lines (fulcrum profile --seed)")
    ap.add_argument("--extrapolate", action="store_true", help="the profile allows lengths outside the grid")
    ap.add_argument("--full-kernel", choices=["flex", "sdpa"], default="flex")
    ap.add_argument("--no-compile", action="store_true", help="eager flex_attention even on cuda (slow reference)")
    ap.add_argument("--out", help="write the RuntimeProfile JSON here")
    ap.add_argument("--details", help="write per-cell details (pairs, tiles, mask build time) as JSON here")
    ap.add_argument("--check", action="store_true", help="verify the mask path first (exits if it fails)")
    ap.add_argument("--check-lengths", default=None, help="default: 3 random + 640 on cpu, 1000 on cuda")
    ap.add_argument("--check-tolerance", type=float, default=None, help="x max|O|; default 2e-5 cpu, 2e-4 cuda")
    a = ap.parse_args(argv)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    device = torch.device(a.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda: no CUDA device visible to torch")
    compile_flex = device.type == "cuda" and not a.no_compile
    if a.check:
        lengths = ([int(x) for x in a.check_lengths.split(",")] if a.check_lengths
                   else check_lengths(a.seed, 3) if device.type == "cpu" else [1000])
        tol = a.check_tolerance if a.check_tolerance is not None else (2e-5 if device.type == "cpu" else 2e-4)
        t0 = time.perf_counter()
        try:
            run_check(device, lengths, a.seed, tol, compile_flex, log)
        except AssertionError as e:
            log(f"CHECK FAILED: {e}")
            return 1
        log(f"check passed ({time.perf_counter() - t0:.1f} s; tolerance {tol:g} x max|O|, fp32)")
        if not a.patterns:
            return 0
    if not a.patterns or not a.out:
        ap.error("--patterns and --out are required to profile")
    opts = Options(
        patterns=profiled_patterns(read_report(a.patterns), a.layers),
        prompt_tokens=[int(x) for x in a.prompt_tokens.split(",") if x.strip()],
        head_dim=a.head_dim, hidden=a.hidden, repeats=a.repeats, dtype=a.dtype, device=a.device, seed=a.seed,
        extrapolate=a.extrapolate, full_kernel=a.full_kernel, compile=compile_flex)
    log(f"profiling {len(opts.patterns)} patterns x {len(opts.prompt_tokens)} lengths on {a.device}: "
        f"{', '.join(p.key() for p in opts.patterns)}")

    def write(result: dict[str, Any], details: list[dict[str, Any]]) -> None:
        Path(a.out).write_text(json.dumps(result, indent=2) + "\n")
        if a.details:
            Path(a.details).write_text(json.dumps(details, indent=2) + "\n")

    result, details, extra = profile(opts, log, on_length=write)  # rewritten after each length
    write(result, details)
    print(f"{result['device']} ({a.patterns})")
    print(table(result, extra))
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
