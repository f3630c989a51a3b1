// Forward kernel. A work item is one (task, q head of the task's range, query tile), under that head's
// mask. Its scores are kept transposed,
// S^T[key][query], so that every vector runs along the 64 queries: the online-softmax maxima, sums
// and rescaling are plain vector operations. S^T = K Q^T broadcasts K's elements against the tile's
// Q^T (packed once per item); O = P V broadcasts P^T's elements against V's rows, a 64-column strip
// at a time, which keeps the strip, P^T and the O rows in L1 (the transposed O^T = V^T P^T ran at
// two thirds of that speed, measured). An item holds up to kBlockTiles query tiles and runs each
// K/V tile against all of them while it is in cache: streaming K and V from memory once per 64
// queries left the products at half speed on long documents (measured).
#include "fulcrum/kernels/attention.hpp"
#include "fulcrum/kernels/columns.hpp"
#include "fulcrum/kernels/non_finite.hpp"
#include "fulcrum/kernels/tiles.hpp"

#include "fulcrum/core/error.hpp"

#include <omp.h>

#include <cmath>
#include <numbers>
#include <vector>

namespace fulcrum::kernels {
namespace {

using namespace simd;

template <class T>
struct Forward {
  std::span<const AttentionTask> tasks;
  HeadTensor<const T> q, k, v;
  HeadTensor<T> o;
  HeadTensor<float> lse;
  const float* k_rows;  // head-major fp32 copies of K and V (head_major)
  const float* v_rows;
  const CallColumns* columns;  // gathered columns of masks that have them
  int group = 1;               // q heads per kv head
  float scale_log2;            // softmax scale * log2(e): scores in base 2
};

constexpr int kBlockTiles = 4;

// Per query tile of the item: Q^T, the output rows, and the running maxima and sums.
struct QueryTileState {
  Floats q_t, o;
  alignas(64) float m[kTile], l[kTile];
};

// A tile to compute: key tile `offset` against query tile `t` of the item.
struct ActiveTile {
  Tokens offset;
  int t;
  TileKind kind;
};

struct ForwardScratch {
  QueryTileState tiles[kBlockTiles];
  std::vector<ActiveTile> active;
  Floats s_t = Floats(kTile * kTile);
  ForwardScratch(int dim, long ld) {
    for (auto& t : tiles) {
      t.q_t.resize(static_cast<std::size_t>(dim) * kTile);
      t.o.resize(static_cast<std::size_t>(ld) * kTile);
    }
  }
};

// How far (base 2) a tile's maximum may exceed a row's reference maximum before the reference moves.
// Rescaling is lazy, as in FlashAttention-4: p = 2^(s - m) then stays below 2^8, and O's rows are
// rescaled only when the reference moves; O / l and m + log2 l do not depend on which reference was
// used. Under a sparse mask each tile lies on another diagonal, whose maximum usually moves a little:
// rescaling every time was ~3% of a forward pass (measured).
constexpr float kRescaleSlack = 8.0f;

// m: the rows' reference maxima (base 2), l: running sums relative to them, 64 of each; o: [64][ld] output rows.
template <class Isa>
FULCRUM_INLINE void online_softmax(float* s_t, int nk, float* o, long ld, Tokens nq, float* m, float* l) {
  using Vec = typename Isa::Vec;
  constexpr int kLanes = Isa::kLanes, kVecs = kTileVecs<Isa>;
  Vec m_new[kVecs], m_safe[kVecs], alpha[kVecs], sum[kVecs];
  for (Vec& x : m_new) x = splat<Vec>(kNegInf);
  for (int j = 0; j < nk; ++j) {
    for (int v = 0; v < kVecs; ++v) m_new[v] = max(m_new[v], load<Vec>(s_t + j * kTile + v * kLanes));
  }
  for (int v = 0; v < kVecs; ++v) {
    const Vec m_old = load<Vec>(m + v * kLanes);
    m_new[v] = m_new[v] > m_old + splat<Vec>(kRescaleSlack) ? m_new[v] : m_old;
    // A row that has seen no visible key keeps max -inf; subtracting 0 keeps its p = 2^-inf = 0.
    m_safe[v] = m_new[v] == splat<Vec>(kNegInf) ? splat<Vec>(0.0f) : m_new[v];
    alpha[v] = exp2_bounded(m_old - m_safe[v]);
    sum[v] = Vec{};
  }
  for (int j = 0; j < nk; ++j) {
    for (int v = 0; v < kVecs; ++v) {
      float* s = s_t + j * kTile + v * kLanes;
      const Vec p = exp2_bounded(load<Vec>(s) - m_safe[v]);
      store(s, p);
      sum[v] += p;
    }
  }
  float scale[kTile];
  for (int v = 0; v < kVecs; ++v) {
    store(l + v * kLanes, load<Vec>(l + v * kLanes) * alpha[v] + sum[v]);
    store(scale + v * kLanes, alpha[v]);
    store(m + v * kLanes, m_new[v]);
  }
  for (Tokens i = 0; i < nq; ++i) {
    if (scale[i] == 1.0f) continue;
    const Vec a = splat<Vec>(scale[i]);
    for (long c = 0; c < ld; c += kLanes) store(o + i * ld + c, load<Vec>(o + i * ld + c) * a);
  }
}

// The item's query tiles against the gathered columns the grid left out, a 64-column chunk (one dense
// K/V tile) at a time, each chunk against every query tile while it is in cache.
template <class Isa, class T>
FULCRUM_INLINE void gathered_tiles(const Forward<T>& f, const WorkItem& item, const HeadColumns& columns,
                                   ForwardScratch& w) {
  const AttentionTask& task = f.tasks[item.task];
  const MaskSpec& mask = task.mask_of(item.head);
  const int dim = f.q.dim;
  const long ld = padded_dim(dim);
  const int n_tiles = static_cast<int>((item.rows.count + kTile - 1) / kTile);
  Tokens sources[kBlockTiles][kTile];
  int tile_index[kBlockTiles];
  Tokens last_source = -1;
  for (int t = 0; t < n_tiles; ++t) {
    const RowSpan tile{item.rows.row + t * kTile, item.rows.position + t * kTile,
                       std::min<Tokens>(kTile, item.rows.count - t * kTile)};
    tile_index[t] = query_tile_index(task, tile);
    for (Tokens i = 0; i < tile.count; ++i) {
      sources[t][i] = mask.source_position(tile.position + i, task.doc_len);
      last_source = std::max(last_source, sources[t][i]);
    }
  }
  std::uint64_t bits[kTile];
  const int chunks = columns.chunks_before(last_source);
  for (int c = 0; c < chunks; ++c) {
    const auto nk =
        static_cast<int>(std::min<std::size_t>(kTile, columns.rows.size() - static_cast<std::size_t>(c) * kTile));
    const float* k = columns.k + static_cast<std::ptrdiff_t>(c) * kTile * ld;
    const float* v = columns.v + static_cast<std::ptrdiff_t>(c) * kTile * ld;
    for (int t = 0; t < n_tiles; ++t) {
      QueryTileState& s = w.tiles[t];
      const Tokens nq = std::min<Tokens>(kTile, item.rows.count - t * kTile);
      if (!columns.tile_bits(tile_index[t], c, sources[t], nq, bits)) continue;
      gemm<Isa>({w.s_t.data(), kTile, k, ld, 1, s.q_t.data(), kTile, dim, nk}, false);  // S^T = K Q^T
      mask_rows<Isa>(w.s_t.data(), true, nq, nk, [&](Tokens i) { return bits[i]; });
      online_softmax<Isa>(w.s_t.data(), nk, s.o.data(), ld, nq, s.m, s.l);
      gemm_wide<Isa>({s.o.data(), ld, w.s_t.data(), 1, kTile, v, ld, nk, nq}, ld, true);  // O += P V
    }
  }
}

template <class Isa, class T>
FULCRUM_INLINE void forward_item(const Forward<T>& f, const WorkItem& item, ForwardScratch& w) {
  const AttentionTask& task = f.tasks[item.task];
  const int dim = f.q.dim;
  const long ld = padded_dim(dim);
  const int kv_head = item.head / f.group;
  const MaskSpec& mask = task.mask_of(item.head);
  const HeadColumns* columns = f.columns->of(item.task, item.head);
  const MaskSpec& grid = columns == nullptr ? mask : columns->rest;
  const int n_tiles = static_cast<int>((item.rows.count + kTile - 1) / kTile);
  auto tile_rows = [&](int t) { return std::min<Tokens>(kTile, item.rows.count - t * kTile); };
  for (int t = 0; t < n_tiles; ++t) {
    QueryTileState& s = w.tiles[t];
    load_transposed<Isa>(s.q_t.data(), f.q.at(item.rows.row + t * kTile, item.head), f.q.row_stride(), tile_rows(t),
                         dim, f.scale_log2);
    std::fill(s.o.begin(), s.o.end(), 0.0f);
    std::fill(std::begin(s.m), std::end(s.m), kNegInf);
    std::fill(std::begin(s.l), std::end(s.l), 0.0f);
  }

  // The active tiles first, so that each K/V tile's rows can be prefetched while the one before computes:
  // under a sparse mask consecutive active tiles are far apart and no hardware prefetcher sees them coming.
  w.active.clear();
  const Range item_queries = positions(item.rows, 0, item.rows.count);
  for (Tokens offset = 0; offset < task.keys.count; offset += kTile) {
    if (skip_span(grid, item_queries, task.keys, true, offset, task.doc_len)) {
      offset += kSkipSpan - kTile;
      continue;
    }
    const Range keys = positions(task.keys, offset, std::min<Tokens>(kTile, task.keys.count - offset));
    for (int t = 0; t < n_tiles; ++t) {
      const Range queries = positions(item.rows, t * kTile, tile_rows(t));
      TileKind kind = grid.classify(queries, keys, task.doc_len);
      if (kind == TileKind::kEmpty) continue;
      if (columns != nullptr) kind = mask.classify(queries, keys, task.doc_len);  // the columns in this tile too
      w.active.push_back({offset, t, kind});
    }
  }
  auto kv_first = [&](Tokens offset) {
    return (static_cast<std::ptrdiff_t>(kv_head) * f.k.rows + task.keys.row + offset) * ld;
  };
  for (std::size_t a = 0; a < w.active.size(); ++a) {
    const auto [offset, t, kind] = w.active[a];
    const Tokens nk = std::min<Tokens>(kTile, task.keys.count - offset);
    Prefetch next_k, next_v;  // the next tile's K and V rows, while this one computes
    if (a + 1 < w.active.size() && w.active[a + 1].offset != offset) {
      const Tokens next = w.active[a + 1].offset, rows = std::min<Tokens>(kTile, task.keys.count - next);
      next_k = Prefetch::rows(f.k_rows + kv_first(next), rows, ld);
      next_v = Prefetch::rows(f.v_rows + kv_first(next), rows, ld);
    }
    QueryTileState& s = w.tiles[t];
    const Tokens nq = tile_rows(t);
    const Range queries = positions(item.rows, t * kTile, nq);
    const Range keys = positions(task.keys, offset, nk);
    const auto first = kv_first(offset);
    gemm<Isa>({w.s_t.data(), kTile, f.k_rows + first, ld, 1, s.q_t.data(), kTile, dim, nk, &next_k},
              false);  // S^T = K Q^T
    mask_scores<Isa>(w.s_t.data(), true, mask, task.doc_len, queries, keys, kind);
    online_softmax<Isa>(w.s_t.data(), static_cast<int>(nk), s.o.data(), ld, nq, s.m, s.l);
    gemm_wide<Isa>({s.o.data(), ld, w.s_t.data(), 1, kTile, f.v_rows + first, ld, nk, nq, &next_v}, ld,
                   true);  // O += P V
  }
  if (columns != nullptr) gathered_tiles<Isa>(f, item, *columns, w);

  for (int t = 0; t < n_tiles; ++t) {
    const QueryTileState& s = w.tiles[t];
    const float* m_row = s.m;
    const float* l_row = s.l;
    for (Tokens i = 0; i < tile_rows(t); ++i) {
      const Tokens row = item.rows.row + t * kTile + i;
      T* out = f.o.at(row, item.head);
      const bool empty = l_row[i] == 0.0f;
      const float inv = empty ? 0.0f : 1.0f / l_row[i];
      for (int c = 0; c < dim; ++c) out[c] = from_float<T>(s.o[static_cast<std::size_t>(i * ld + c)] * inv);
      *f.lse.at(row, item.head) = empty ? kNegInf : (m_row[i] + std::log2(l_row[i])) * std::numbers::ln2_v<float>;
    }
  }
}

// forward_item compiled once per ISA (simd::dispatch).
struct ForwardItem {
  template <class Isa, class T>
  FULCRUM_INLINE static void run(const Forward<T>& f, const WorkItem& item, ForwardScratch& w) {
    forward_item<Isa>(f, item, w);
  }
};

template <class T>
void run_forward(std::span<const AttentionTask> tasks, const AttentionShape& shape, HeadTensor<const T> q,
                 HeadTensor<const T> k, HeadTensor<const T> v, HeadTensor<T> o, HeadTensor<float> lse) {
  const float* k_rows = head_major(k, 0);
  const float* v_rows = head_major(v, 1);
  const CallColumns columns(tasks, shape.q_heads, shape.kv_heads, k_rows, v_rows, k.rows, padded_dim(shape.head_dim));
  const Forward<T> f{tasks,
                     q,
                     k,
                     v,
                     o,
                     lse,
                     k_rows,
                     v_rows,
                     &columns,
                     shape.q_heads / shape.kv_heads,
                     shape.softmax_scale() * std::numbers::log2e_v<float>};
  const std::vector<WorkItem> items = query_tiles(tasks, shape.q_heads, kBlockTiles * kTile);
  const auto n = static_cast<std::ptrdiff_t>(items.size());
  const fulcrum::simd::Isa isa = fulcrum::simd::active_isa();
#pragma omp parallel
  {
    ForwardScratch scratch(shape.head_dim, padded_dim(shape.head_dim));
#pragma omp for schedule(dynamic, 1)
    for (std::ptrdiff_t i = 0; i < n; ++i) dispatch<ForwardItem>(isa, f, items[static_cast<std::size_t>(i)], scratch);
  }
}

}  // namespace

template <class T>
void attention_forward(std::span<const AttentionTask> tasks, const AttentionShape& shape, HeadTensor<const T> q,
                       HeadTensor<const T> k, HeadTensor<const T> v, HeadTensor<T> o, HeadTensor<float> lse) {
  shape.validate();
  check_shape("q", q, q.rows, shape.q_heads, shape.head_dim);
  check_shape("k", k, k.rows, shape.kv_heads, shape.head_dim);
  check_shape("v", v, k.rows, shape.kv_heads, shape.head_dim);
  check_shape("o", o, q.rows, shape.q_heads, shape.head_dim);
  check_shape("lse", lse, q.rows, shape.q_heads, 1);
  validate_tasks(tasks, q.rows, k.rows, shape.q_heads);
  const ForwardKernel<T> kernel = [&](HeadTensor<const T> q_in, HeadTensor<const T> k_in, HeadTensor<const T> v_in) {
    run_forward<T>(tasks, shape, q_in, k_in, v_in, o, lse);
  };
  if (!forward_with_non_finite<T>(tasks, shape, q, k, v, o, lse, kernel)) kernel(q, k, v);
}

template void attention_forward<float>(std::span<const AttentionTask>, const AttentionShape&, HeadTensor<const float>,
                                       HeadTensor<const float>, HeadTensor<const float>, HeadTensor<float>,
                                       HeadTensor<float>);
template void attention_forward<BFloat16>(std::span<const AttentionTask>, const AttentionShape&,
                                          HeadTensor<const BFloat16>, HeadTensor<const BFloat16>,
                                          HeadTensor<const BFloat16>, HeadTensor<BFloat16>, HeadTensor<float>);

}  // namespace fulcrum::kernels
