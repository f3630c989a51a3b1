// Tile plumbing shared by the forward and backward kernels (internal): the work list, loading rows of
// fp32 or bf16 storage into fp32 tiles, and masking the partial tiles.
#pragma once

#include "fulcrum/kernels/attention_task.hpp"
#include "fulcrum/kernels/bf16.hpp"
#include "fulcrum/kernels/simd.hpp"

#include <span>
#include <type_traits>
#include <utility>
#include <vector>

namespace fulcrum::kernels {

class CallColumns;

/// Consecutive rows (64, or a block of several 64-row tiles) of one task range (query rows in the forward pass and dQ,
/// key rows in dK/dV), for one head (a q head, or a kv head for key tiles).
struct WorkItem {
  int task = 0;
  int head = 0;
  RowSpan rows;
  double cost = 0;      // visible pairs: the scheduler runs the largest items first
  bool shared = false;  // key tiles: another item may add into some of these rows at the same time
  int columns = -1;     // >= 0: rows are columns [row, row + count) of that gathered set (CallColumns)
};

/// Tiles of up to `rows` (a multiple of 64) rows of each task's query ranges, for every q head of the
/// task's head range, largest first.
std::vector<WorkItem> query_tiles(std::span<const AttentionTask> tasks, int q_heads, Tokens rows = simd::kTile);
/// 64-row tiles of each task's key range, for every kv head some q head of the task reads (GQA:
/// q head h reads kv head h / (q_heads / kv_heads)), largest first.
std::vector<WorkItem> key_tiles(std::span<const AttentionTask> tasks, int q_heads, int kv_heads);
/// 64-column chunks of every gathered column set of `columns` (item.columns: the set), largest first.
/// Shared when another set of the same kv head (per-head masks under GQA) or another task may hold
/// the same rows.
std::vector<WorkItem> column_tiles(std::span<const AttentionTask> tasks, const CallColumns& columns, int q_heads,
                                   int kv_heads);

inline Range positions(const RowSpan& r, Tokens offset, Tokens count) {
  return {r.position + offset, r.position + offset + count};
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
/// of their speed (measured). bf16 is converted here once instead of once per tile. A tensor that is
/// that layout already (fp32, one head, head_dim a multiple of 64, unscaled: a rank's share of a
/// tensor-parallel layer) is read in place: under a sparse mask the copy was ~7% of a forward pass.
template <class T>
const float* head_major(HeadTensor<const T> t, int slot, float scale = 1.0f) {
  const long ld = padded_dim(t.dim);
  if constexpr (std::is_same_v<T, float>) {
    if (t.heads == 1 && t.dim == ld && scale == 1.0f) return t.data;
  }
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

/// Rows a grid loop tests at once before testing tile by tile: under a sparse mask most such spans are
/// empty, and one classify of the span replaces 16 (the per-tile tests were ~6% of a sparse call,
/// measured); under a dense one the span costs one extra test per 16 tiles.
inline constexpr Tokens kSkipSpan = 16 * simd::kTile;

/// Whether a grid loop over `rows` may skip the kSkipSpan rows from `offset` when offset is a multiple
/// of kSkipSpan: `mask` has no visible pair between them and `other` (keys when `rows` are queries,
/// queries when they are keys).
inline bool skip_span(const MaskSpec& mask, Range other, const RowSpan& rows, bool rows_are_keys, Tokens offset,
                      Tokens doc_len) {
  if (offset % kSkipSpan != 0) return false;
  const Range span = positions(rows, offset, std::min(kSkipSpan, rows.count - offset));
  return mask.classify(rows_are_keys ? other : span, rows_are_keys ? span : other, doc_len) == TileKind::kEmpty;
}

namespace detail {
/// Transposes a 64 x 64 bit matrix in place (bit j of word i becomes bit i of word j): six rounds swap
/// the off-diagonal blocks of 32, 16, ..., 1 bits between word pairs.
inline void transpose_bits(std::uint64_t* w) {
  std::uint64_t m = 0x00000000FFFFFFFFull;
  for (int j = 32; j != 0; j >>= 1, m ^= m << j) {
    for (int k = 0; k < 64; k = (k + j + 1) & ~j) {
      const std::uint64_t t = ((w[k] >> j) ^ w[k + j]) & m;
      w[k] ^= t << j;
      w[k + j] ^= t;
    }
  }
}
}  // namespace detail

}  // namespace fulcrum::kernels
