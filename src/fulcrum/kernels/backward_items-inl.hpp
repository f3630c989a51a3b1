// The backward kernel's work items (no include guard): compiled once per ISA by backward.cpp, inside its
// isa_* namespaces (core/simd_foreach_isa.hpp), where `Isa` is the version's type.
#include "fulcrum/kernels/vectors-inl.hpp"

// Scores (already masked) become P = 2^(S - lse2); dP becomes dS = P * (dP - D). Row-major: one
// LSE and D per row (at `stride` apart); transposed: vectors of them along the 64 queries.
FULCRUM_INLINE void softmax_grad_rows(float* s, float* dp, Tokens rows, const float* lse2, const float* delta,
                                      int stride) {
  using Vec = Isa::Vec;
  constexpr int kLanes = Isa::kLanes;
  for (Tokens i = 0; i < rows; ++i) {
    const Vec l = splat<Vec>(lse2[i * stride]), d = splat<Vec>(delta[i * stride]);
    for (int v = 0; v < kTileVecs; ++v) {
      float* si = s + i * kTile + v * kLanes;
      float* dpi = dp + i * kTile + v * kLanes;
      const Vec p = exp2_bounded(load<Vec>(si) - l);
      store(si, p);
      store(dpi, p * (load<Vec>(dpi) - d));
    }
  }
}
FULCRUM_INLINE void softmax_grad_transposed(float* s_t, float* dp_t, Tokens keys, const float* lse2,
                                            const float* delta) {
  using Vec = Isa::Vec;
  constexpr int kLanes = Isa::kLanes;
  for (Tokens j = 0; j < keys; ++j) {
    for (int v = 0; v < kTileVecs; ++v) {
      float* sj = s_t + j * kTile + v * kLanes;
      float* dpj = dp_t + j * kTile + v * kLanes;
      const Vec p = exp2_bounded(load<Vec>(sj) - load<Vec>(lse2 + v * kLanes));
      store(sj, p);
      store(dpj, p * (load<Vec>(dpj) - load<Vec>(delta + v * kLanes)));
    }
  }
}

// dK/dV for one key tile of one kv head: row-major scores S[query][key] (vectors along the keys),
// then dV[j] += sum_i P[i][j] dO[i] and dK[j] += sum_i dS[i][j] Q[i] broadcast P and dS against dO's
// and Q's rows, a 64-column strip at a time.
template <class T>
FULCRUM_INLINE void key_item(const Backward<T>& b, std::size_t index, const WorkItem& item, Scratch& w) {
  const AttentionTask& task = b.tasks[item.task];
  const int dim = b.q.dim;
  const long ld = padded_dim(dim);
  const Tokens nk = item.rows.count;
  const Range keys = positions(item.rows, 0, nk);
  float* k_t = w.a_t.data();
  float* v_t = w.b_t.data();
  float* dk = w.acc_a.data();
  float* dv = w.acc_b.data();
  load_transposed(k_t, b.k_rows + b.k_first(item.rows.row, item.head), ld, nk, dim, 1.0f);
  load_transposed(v_t, b.v_rows + b.k_first(item.rows.row, item.head), ld, nk, dim, 1.0f);
  std::fill(w.acc_a.begin(), w.acc_a.end(), 0.0f);
  std::fill(w.acc_b.begin(), w.acc_b.end(), 0.0f);

  // The q heads of this kv head's group that the task covers, each under its own mask.
  const int h0 = std::max(item.head * b.group, task.heads.first());
  const int h1 = std::min((item.head + 1) * b.group, task.heads.last(b.q.heads));
  w.active.clear();
  for (int h = h0; h < h1; ++h) {
    const MaskSpec& mask = task.mask_of(h);
    const MaskSpec& grid = b.columns->grid_mask(item.task, h, mask);
    for (const RowSpan& range : task.queries) {
      for (Tokens offset = 0; offset < range.count; offset += kTile) {
        if (skip_span(grid, keys, range, false, offset, task.doc_len)) {
          offset += kSkipSpan - kTile;
          continue;
        }
        const Tokens nq = std::min<Tokens>(kTile, range.count - offset);
        const Range queries = positions(range, offset, nq);
        TileKind kind = grid.classify(queries, keys, task.doc_len);
        if (kind == TileKind::kEmpty) continue;
        if (&grid != &mask) kind = mask.classify(queries, keys, task.doc_len);  // the columns in this tile too
        w.active.push_back({range.row + offset, queries.begin, nq, h, kind});
      }
    }
  }
  for (std::size_t a = 0; a < w.active.size(); ++a) {
    const auto [row, position, nq, h, kind] = w.active[a];
    Prefetch next_q, next_do;  // Q and dO rows of the next tile (sparse masks: far from these)
    if (a + 1 < w.active.size()) {
      const ActiveTile& next = w.active[a + 1];
      next_q = Prefetch::rows(b.q_rows + b.q_first(next.row, next.head), next.count, ld);
      next_do = Prefetch::rows(b.do_rows + b.q_first(next.row, next.head), next.count, ld);
    }
    const MaskSpec& mask = task.mask_of(h);
    const float* qs = b.q_rows + b.q_first(row, h);
    const float* d_o = b.do_rows + b.q_first(row, h);
    gemm({w.s.data(), kTile, qs, ld, 1, k_t, kTile, dim, nq, &next_q}, false);  // S = Q K^T
    mask_scores(w.s.data(), false, mask, task.doc_len, {position, position + nq}, keys, kind);
    gemm({w.dp.data(), kTile, d_o, ld, 1, v_t, kTile, dim, nq, &next_do}, false);  // dP = dO V^T
    softmax_grad_rows(w.s.data(), w.dp.data(), nq, b.lse2 + b.row_head(row, h), b.delta + b.row_head(row, h),
                      b.q.heads);
    gemm_wide({dv, ld, w.s.data(), 1, kTile, d_o, ld, nq, nk}, ld, true);  // dV += P^T dO
    gemm_wide({dk, ld, w.dp.data(), 1, kTile, qs, ld, nq, nk}, ld, true);  // dK += dS^T Q
  }
  add_key_rows(b, index, item, w);
}

// dK/dV for one chunk of gathered columns: as key_item, against every query tile of the set's heads,
// each row under gathered_row_bits (the columns it sees that the grid did not compute).
template <class T>
FULCRUM_INLINE void column_item(const Backward<T>& b, std::size_t index, const WorkItem& item, Scratch& w) {
  const HeadColumns& columns = b.columns->sets()[static_cast<std::size_t>(item.columns)];
  const AttentionTask& task = b.tasks[item.task];
  const int dim = b.q.dim;
  const long ld = padded_dim(dim);
  const Tokens nk = item.rows.count;
  const int chunk = static_cast<int>(item.rows.row / kTile);
  load_transposed(w.a_t.data(), columns.k + item.rows.row * ld, ld, nk, dim, 1.0f);
  load_transposed(w.b_t.data(), columns.v + item.rows.row * ld, ld, nk, dim, 1.0f);
  std::fill(w.acc_a.begin(), w.acc_a.end(), 0.0f);
  std::fill(w.acc_b.begin(), w.acc_b.end(), 0.0f);
  const Tokens first_source = columns.sources[static_cast<std::size_t>(item.rows.row)];
  Tokens sources[kTile];
  std::uint64_t bits[kTile];
  for (int h = columns.q_begin; h < columns.q_end; ++h) {
    const MaskSpec& mask = task.mask_of(h);
    int tile = 0;
    for (const RowSpan& range : task.queries) {
      for (Tokens offset = 0; offset < range.count; offset += kTile, ++tile) {
        const Tokens nq = std::min<Tokens>(kTile, range.count - offset);
        Tokens last_source = -1;
        for (Tokens i = 0; i < nq; ++i) {
          sources[i] = mask.source_position(range.position + offset + i, task.doc_len);
          last_source = std::max(last_source, sources[i]);
        }
        if (last_source < first_source || !columns.tile_bits(tile, chunk, sources, nq, bits)) continue;
        const Tokens row = range.row + offset;
        const float* qs = b.q_rows + b.q_first(row, h);
        const float* d_o = b.do_rows + b.q_first(row, h);
        gemm({w.s.data(), kTile, qs, ld, 1, w.a_t.data(), kTile, dim, nq}, false);  // S = Q K^T
        mask_rows(w.s.data(), false, nq, static_cast<int>(nk), [&](Tokens i) { return bits[i]; });
        gemm({w.dp.data(), kTile, d_o, ld, 1, w.b_t.data(), kTile, dim, nq}, false);  // dP = dO V^T
        softmax_grad_rows(w.s.data(), w.dp.data(), nq, b.lse2 + b.row_head(row, h), b.delta + b.row_head(row, h),
                          b.q.heads);
        gemm_wide({w.acc_b.data(), ld, w.s.data(), 1, kTile, d_o, ld, nq, nk}, ld, true);  // dV += P^T dO
        gemm_wide({w.acc_a.data(), ld, w.dp.data(), 1, kTile, qs, ld, nq, nk}, ld, true);  // dK += dS^T Q
      }
    }
  }
  add_key_rows(b, index, item, w);
}

// dQ for one query tile of one q head: transposed scores as in the forward pass, then
// dQ[i] += sum_j dS^T[j][i] K[j] broadcasts dS^T against K's rows.
template <class T>
FULCRUM_INLINE void query_item(const Backward<T>& b, std::size_t, const WorkItem& item, Scratch& w) {
  const AttentionTask& task = b.tasks[item.task];
  const int dim = b.q.dim;
  const long ld = padded_dim(dim);
  const int kv_head = item.head / b.group;
  const MaskSpec& mask = task.mask_of(item.head);
  const Tokens nq = item.rows.count;
  const Range queries = positions(item.rows, 0, nq);
  float* q_t = w.a_t.data();
  float* do_t = w.b_t.data();
  float* dq = w.acc_a.data();
  load_transposed(q_t, b.q_rows + b.q_first(item.rows.row, item.head), ld, nq, dim, 1.0f);
  load_transposed(do_t, b.do_rows + b.q_first(item.rows.row, item.head), ld, nq, dim, 1.0f);
  std::fill(w.acc_a.begin(), w.acc_a.end(), 0.0f);
  float lse2[kTile], delta[kTile];
  for (Tokens i = 0; i < kTile; ++i) {
    lse2[i] = i < nq ? b.lse2[b.row_head(item.rows.row + i, item.head)] : __builtin_inff();
    delta[i] = i < nq ? b.delta[b.row_head(item.rows.row + i, item.head)] : 0.0f;
  }

  // One K/V tile of nk rows (the grid's, or gathered columns'), masked by `mask_tile(s^T)`, while the
  // next grid tile's K and V rows are prefetched (sparse masks: far from these).
  Prefetch next_k, next_v;
  auto add_tile = [&](const float* k_tile, const float* v_tile, Tokens nk, auto&& mask_tile) {
    gemm({w.s.data(), kTile, k_tile, ld, 1, q_t, kTile, dim, nk, &next_k}, false);  // S^T = K Q^T
    mask_tile(w.s.data());
    gemm({w.dp.data(), kTile, v_tile, ld, 1, do_t, kTile, dim, nk, &next_v}, false);  // dP^T = V dO^T
    softmax_grad_transposed(w.s.data(), w.dp.data(), nk, lse2, delta);
    gemm_wide({dq, ld, w.dp.data(), 1, kTile, k_tile, ld, nk, nq}, ld, true);  // dQ += dS K
  };
  const HeadColumns* columns = b.columns->of(item.task, item.head);
  const MaskSpec& grid = columns == nullptr ? mask : columns->rest;
  w.active.clear();
  for (Tokens offset = 0; offset < task.keys.count; offset += kTile) {
    if (skip_span(grid, queries, task.keys, true, offset, task.doc_len)) {
      offset += kSkipSpan - kTile;
      continue;
    }
    const Tokens nk = std::min<Tokens>(kTile, task.keys.count - offset);
    const Range keys = positions(task.keys, offset, nk);
    TileKind kind = grid.classify(queries, keys, task.doc_len);
    if (kind == TileKind::kEmpty) continue;
    if (columns != nullptr) kind = mask.classify(queries, keys, task.doc_len);  // the columns in this tile too
    w.active.push_back({task.keys.row + offset, keys.begin, nk, item.head, kind});
  }
  for (std::size_t a = 0; a < w.active.size(); ++a) {
    const ActiveTile& tile = w.active[a];  // not a structured binding: the lambda below captures it
    next_k = next_v = {};
    if (a + 1 < w.active.size()) {
      const ActiveTile& next = w.active[a + 1];
      next_k = Prefetch::rows(b.k_rows + b.k_first(next.row, kv_head), next.count, ld);
      next_v = Prefetch::rows(b.v_rows + b.k_first(next.row, kv_head), next.count, ld);
    }
    const Range keys{tile.position, tile.position + tile.count};
    add_tile(b.k_rows + b.k_first(tile.row, kv_head), b.v_rows + b.k_first(tile.row, kv_head), tile.count,
             [&](float* s) { mask_scores(s, true, mask, task.doc_len, queries, keys, tile.kind); });
  }
  if (columns != nullptr) {
    Tokens sources[kTile];
    std::uint64_t bits[kTile];
    Tokens last_source = -1;
    for (Tokens i = 0; i < nq; ++i) {
      sources[i] = mask.source_position(queries.begin + i, task.doc_len);
      last_source = std::max(last_source, sources[i]);
    }
    const int query_tile = query_tile_index(task, item.rows);
    for (int c = 0, chunks = columns->chunks_before(last_source); c < chunks; ++c) {
      if (!columns->tile_bits(query_tile, c, sources, nq, bits)) continue;
      const auto nk = std::min<Tokens>(kTile, static_cast<Tokens>(columns->rows.size()) - c * kTile);
      add_tile(columns->k + c * kTile * ld, columns->v + c * kTile * ld, nk,
               [&](float* s) { mask_rows(s, true, nq, static_cast<int>(nk), [&](Tokens i) { return bits[i]; }); });
    }
  }
  for (Tokens i = 0; i < nq; ++i) {
    float* out = b.dq.at(item.rows.row + i, item.head);
    for (int c = 0; c < dim; ++c) out[c] += dq[i * ld + c] * b.scale;
  }
}

/// One work item of `kind`, in this ISA's version (FULCRUM_DISPATCH calls it).
template <class T>
void backward_item(ItemKind kind, const Backward<T>& b, std::size_t index, const WorkItem& item, Scratch& w) {
  switch (kind) {
    case ItemKind::kKey: return key_item(b, index, item, w);
    case ItemKind::kColumn: return column_item(b, index, item, w);
    case ItemKind::kQuery: return query_item(b, index, item, w);
  }
}
