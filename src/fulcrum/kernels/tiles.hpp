// Tile plumbing shared by the forward and backward kernels (internal): the work list, loading rows of
// fp32 or bf16 storage into fp32 tiles, and masking the partial tiles.
#pragma once

#include "fulcrum/kernels/attention_task.hpp"
#include "fulcrum/kernels/bf16.hpp"
#include "fulcrum/kernels/simd.hpp"

#include <span>
#include <vector>

namespace fulcrum::kernels {

/// Consecutive rows (64, or a block of several 64-row tiles) of one task range (query rows in the forward pass and dQ,
/// key rows in dK/dV), for one head (a q head, or a kv head for key tiles).
struct WorkItem {
  int task = 0;
  int head = 0;
  RowSpan rows;
  double cost = 0;      // visible pairs: the scheduler runs the largest items first
  bool shared = false;  // key tiles: another task reads some of these rows too (dK/dV adds must be atomic)
};

/// Tiles of up to `rows` (a multiple of 64) rows of each task's query ranges, for every q head of the
/// task's head range, largest first.
std::vector<WorkItem> query_tiles(std::span<const AttentionTask> tasks, int q_heads, Tokens rows = simd::kTile);
/// 64-row tiles of each task's key range, for every kv head some q head of the task reads (GQA:
/// q head h reads kv head h / (q_heads / kv_heads)), largest first.
std::vector<WorkItem> key_tiles(std::span<const AttentionTask> tasks, int q_heads, int kv_heads);

inline Range positions(const RowSpan& r, Tokens offset, Tokens count) {
  return {r.position + offset, r.position + offset + count};
}

/// out[c][i] = scale * src[i][c], out is [dim][64] and zero past `count`.
template <class T>
FULCRUM_INLINE void load_transposed(float* out, const T* src, std::ptrdiff_t stride, Tokens count, int dim,
                                    float scale) {
  for (int c = 0; c < dim; ++c) {
    float* row = out + c * simd::kTile;
    for (Tokens i = 0; i < count; ++i) row[i] = scale * to_float(src[i * stride + c]);
    for (Tokens i = count; i < simd::kTile; ++i) row[i] = 0.0f;
  }
}

/// Row length of the kernels' fp32 copies: head_dim rounded up to whole 64-float strips, zero-padded,
/// so every product runs on full strips whatever the head dimension.
inline long padded_dim(int dim) { return (dim + simd::kTile - 1) / simd::kTile * simd::kTile; }

/// Kernel scratch that outlives a call: slot `slot` of the calling thread, grown to `floats` and
/// reused. The head-major copies below are as large as K and V; allocating them afresh every call
/// spent ~10% of a 4K-token forward pass in page faults (measured).
float* call_workspace(int slot, std::size_t floats);

/// A tensor re-laid out head-major in fp32 and scaled, [head][row][padded_dim], once per call, into
/// workspace slot `slot`. Token-major rows of one head are heads * dim floats apart (4 KB for 8 heads
/// of 128): a tile's rows then alias in L1 and defeat the prefetchers, which cost the products a third
/// of their speed (measured). bf16 is converted here once instead of once per tile.
template <class T>
const float* head_major(HeadTensor<const T> t, int slot, float scale = 1.0f) {
  const long ld = padded_dim(t.dim);
  float* out = call_workspace(slot, static_cast<std::size_t>(t.rows * t.heads * ld));
  const auto rows = t.rows;
  const auto cells = static_cast<std::ptrdiff_t>(rows) * t.heads;
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t cell = 0; cell < cells; ++cell) {
    const int h = static_cast<int>(cell / rows);
    const Tokens row = cell % rows;
    const T* src = t.at(row, h);
    float* dst = out + cell * ld;
    for (int c = 0; c < t.dim; ++c) dst[c] = scale * to_float(src[c]);
    for (long c = t.dim; c < ld; ++c) dst[c] = 0.0f;
  }
  return out;
}

/// Sets masked scores to -inf. `transposed`: scores are [key][query] (else [query][key]), ld 64.
/// Keys past `keys.size()` (a short last tile) are masked too; a full 64-key tile is left as is.
FULCRUM_INLINE void mask_scores(float* s, bool transposed, const MaskSpec& mask, Tokens doc_len, Range queries,
                                Range keys, TileKind kind) {
  const int nk = static_cast<int>(keys.size());
  const bool partial = kind == TileKind::kPartial;
  if (!partial && nk == simd::kTile) return;
  const Tokens nq = queries.size();
  for (Tokens i = 0; i < nq; ++i) {
    std::uint64_t bits =
        partial ? mask.row_bits(queries.begin + i, keys.begin, nk, doc_len) : (nk == 64 ? ~0ull : (1ull << nk) - 1);
    if (bits == ~0ull) continue;
    // Transposed scores have only nk key rows; row-major ones have 64 columns, zero-padded past nk.
    for (int j = 0; j < (transposed ? nk : simd::kTile); ++j) {
      if ((bits >> j) & 1u) continue;
      (transposed ? s[j * simd::kTile + i] : s[i * simd::kTile + j]) = simd::kNegInf;
    }
  }
}

}  // namespace fulcrum::kernels
