// The forward kernel's work item (no include guard): compiled once per ISA by forward.cpp, inside its
// isa_* namespaces (core/simd_foreach_isa.hpp), where `Isa` is the version's type.
#include "fulcrum/kernels/vectors-inl.hpp"

// m: the rows' reference maxima (base 2), l: running sums relative to them, 64 of each; o: [64][ld] output rows.
FULCRUM_INLINE void online_softmax(float* s_t, int nk, float* o, long ld, Tokens nq, float* m, float* l) {
  using Vec = Isa::Vec;
  constexpr int kLanes = Isa::kLanes, kVecs = kTileVecs;
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
template <class T>
FULCRUM_INLINE void gathered_tiles(const Forward<T>& f, const WorkItem& item, const HeadColumns& columns,
                                   ForwardScratch& w, bool& finite_so_far) {
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
      gemm({w.s_t.data(), kTile, k, ld, 1, s.q_t.data(), kTile, dim, nk}, false);  // S^T = K Q^T
      finite_so_far = finite_so_far && finite(w.s_t.data(), nk * kTile);
      mask_rows(w.s_t.data(), true, nq, nk, [&](Tokens i) { return bits[i]; });
      online_softmax(w.s_t.data(), nk, s.o.data(), ld, nq, s.m, s.l);
      gemm_wide({s.o.data(), ld, w.s_t.data(), 1, kTile, v, ld, nk, nq}, ld, true);  // O += P V
    }
  }
}

template <class T>
void forward_item(const Forward<T>& f, const WorkItem& item, ForwardScratch& w) {
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
    load_transposed(s.q_t.data(), f.q.at(item.rows.row + t * kTile, item.head), f.q.row_stride(), tile_rows(t), dim,
                    f.scale_log2);
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
  bool finite_so_far = true;  // every score and output of the item so far
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
    gemm({w.s_t.data(), kTile, f.k_rows + first, ld, 1, s.q_t.data(), kTile, dim, nk, &next_k},
         false);  // S^T = K Q^T
    // Before masking: a score of -inf from a non-finite Q or K would pass for a masked one after it.
    finite_so_far = finite_so_far && finite(w.s_t.data(), nk * kTile);
    mask_scores(w.s_t.data(), true, mask, task.doc_len, queries, keys, kind);
    online_softmax(w.s_t.data(), static_cast<int>(nk), s.o.data(), ld, nq, s.m, s.l);
    gemm_wide({s.o.data(), ld, w.s_t.data(), 1, kTile, f.v_rows + first, ld, nk, nq, &next_v}, ld,
              true);  // O += P V
  }
  if (columns != nullptr) gathered_tiles(f, item, *columns, w, finite_so_far);

  for (int t = 0; t < n_tiles; ++t) {
    const QueryTileState& s = w.tiles[t];
    // A non-finite V reaches O (0 * inf is NaN, so even through masked pairs).
    finite_so_far = finite_so_far && finite(s.o.data(), tile_rows(t) * ld);
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
  if (!finite_so_far) f.met_non_finite->store(true, std::memory_order_relaxed);
}
