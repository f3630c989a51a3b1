// Backward kernel, FlashAttention-2 style: P is recomputed from the saved LSE, and
// dS = P * (dP - D) with D = rowsum(dO * O). Two passes, so that no two threads ever add into the
// same output rows except where tasks share key rows:
//   dK/dV: one work item per (task, kv head, key tile) owns its dK/dV rows and sweeps every
//          query tile of every q head of its group that the task covers, each under its head's mask
//          (scores row-major, vectors along the keys);
//   dQ:    one work item per (task, q head, query tile) owns its dQ rows and sweeps the key
//          tiles (scores transposed, as in the forward pass).
// Recomputing S and dP in both passes costs 7 tile products instead of 5; the alternative, atomic
// adds into dQ on every key tile, costs more than the two products it saves on a CPU.
// Key rows that several tasks read are the one place two items add into the same rows. The fast path
// adds them atomically, so the sum's order (and its last bits) follows the thread schedule. The
// deterministic mode (AttentionShape::deterministic) has each such item write its finished tile to
// a partial of its own, then adds the partials task by task: every element is summed in task order,
// the same at any thread count.
#include "fulcrum/kernels/attention.hpp"
#include "fulcrum/kernels/columns.hpp"
#include "fulcrum/kernels/non_finite.hpp"
#include "fulcrum/kernels/tiles.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

namespace fulcrum::kernels {
namespace {

using namespace simd;

// The deterministic mode's dK/dV partials, kept per calling thread between calls like call_workspace's.
float* partials_workspace(std::size_t floats) {
  thread_local Floats buffer;
  if (buffer.size() < floats) buffer.resize(floats);
  return buffer.data();
}

template <class T>
struct Backward {
  std::span<const AttentionTask> tasks;
  HeadTensor<const T> q, k, v, d_o;
  HeadTensor<float> dq, dk, dv;
  const float* lse2;     // [q rows][q heads]: LSE in base 2, +inf for rows with no visible key
  const float* delta;    // [q rows][q heads]: rowsum(dO * O)
  const float* q_rows;   // head-major fp32 copies (head_major): Q scaled by scale * log2(e),
  const float* do_rows;  // dO, K and V as they are
  const float* k_rows;
  const float* v_rows;
  const CallColumns* columns;  // gathered columns of masks that have them
  int group = 1;
  float scale = 1;
  // Deterministic mode: key item i writes its dK, then its dV ([rows][dim] each), at partials +
  // partial_at[i] when partial_at[i] >= 0 (the items whose rows another task reads) instead of adding.
  float* partials = nullptr;
  const std::ptrdiff_t* partial_at = nullptr;

  std::size_t row_head(Tokens row, int head) const { return static_cast<std::size_t>(row) * q.heads + head; }
  // The K/V buffer row of a key item's j-th row.
  Tokens key_row(const WorkItem& item, Tokens j) const {
    return item.columns < 0 ? item.rows.row + j
                            : columns->sets()[static_cast<std::size_t>(item.columns)]
                                  .rows[static_cast<std::size_t>(item.rows.row + j)];
  }
  // Offsets into the head-major copies, whose rows are padded_dim floats long.
  std::ptrdiff_t q_first(Tokens row, int head) const {
    return (static_cast<std::ptrdiff_t>(head) * q.rows + row) * padded_dim(q.dim);
  }
  std::ptrdiff_t k_first(Tokens row, int head) const {
    return (static_cast<std::ptrdiff_t>(head) * k.rows + row) * padded_dim(k.dim);
  }
};

// A tile to compute: the other side's 64 rows at `row` (buffer) and `position` (document), of q head
// `head` (key items) — collected before computing, so the next tile's rows can be prefetched.
struct ActiveTile {
  Tokens row, position, count;
  int head;
  TileKind kind;
};

struct Scratch {
  Floats a_t, b_t, acc_a, acc_b, s, dp;
  std::vector<ActiveTile> active;
  Scratch(int dim, long ld) {
    for (auto* t : {&a_t, &b_t}) t->resize(static_cast<std::size_t>(dim) * kTile);
    for (auto* t : {&acc_a, &acc_b}) t->assign(static_cast<std::size_t>(ld) * kTile, 0.0f);
    s.resize(kTile * kTile);
    dp.resize(kTile * kTile);
  }
};

// Scores (already masked) become P = 2^(S - lse2); dP becomes dS = P * (dP - D). Row-major: one
// LSE and D per row (at `stride` apart); transposed: vectors of them along the 64 queries.
template <class Isa>
FULCRUM_INLINE void softmax_grad_rows(float* s, float* dp, Tokens rows, const float* lse2, const float* delta,
                                      int stride) {
  using Vec = typename Isa::Vec;
  constexpr int kLanes = Isa::kLanes;
  for (Tokens i = 0; i < rows; ++i) {
    const Vec l = splat<Vec>(lse2[i * stride]), d = splat<Vec>(delta[i * stride]);
    for (int v = 0; v < kTileVecs<Isa>; ++v) {
      float* si = s + i * kTile + v * kLanes;
      float* dpi = dp + i * kTile + v * kLanes;
      const Vec p = exp2_bounded(load<Vec>(si) - l);
      store(si, p);
      store(dpi, p * (load<Vec>(dpi) - d));
    }
  }
}
template <class Isa>
FULCRUM_INLINE void softmax_grad_transposed(float* s_t, float* dp_t, Tokens keys, const float* lse2,
                                            const float* delta) {
  using Vec = typename Isa::Vec;
  constexpr int kLanes = Isa::kLanes;
  for (Tokens j = 0; j < keys; ++j) {
    for (int v = 0; v < kTileVecs<Isa>; ++v) {
      float* sj = s_t + j * kTile + v * kLanes;
      float* dpj = dp_t + j * kTile + v * kLanes;
      const Vec p = exp2_bounded(load<Vec>(sj) - load<Vec>(lse2 + v * kLanes));
      store(sj, p);
      store(dpj, p * (load<Vec>(dpj) - load<Vec>(delta + v * kLanes)));
    }
  }
}

// Adds a key item's finished dK/dV (Scratch acc_a, acc_b) into its rows. Items that may add into the
// same rows concurrently (`shared`) add atomically or, in deterministic mode, write a partial that
// add_partials sums in a fixed order.
template <class T>
FULCRUM_INLINE void add_key_rows(const Backward<T>& b, std::size_t index, const WorkItem& item, const Scratch& w) {
  const int dim = b.q.dim;
  const long ld = padded_dim(dim);
  const Tokens nk = item.rows.count;
  const float* dk = w.acc_a.data();
  const float* dv = w.acc_b.data();
  const float to_natural = std::numbers::ln2_v<float>;  // dK was accumulated with Q scaled by log2(e)
  if (b.partials != nullptr && b.partial_at[index] >= 0) {
    float* dk_part = b.partials + b.partial_at[index];
    float* dv_part = dk_part + nk * dim;
    for (Tokens j = 0; j < nk; ++j) {
      for (int c = 0; c < dim; ++c) {
        dk_part[j * dim + c] = dk[j * ld + c] * to_natural;
        dv_part[j * dim + c] = dv[j * ld + c];
      }
    }
    return;
  }
  for (Tokens j = 0; j < nk; ++j) {
    float* dk_out = b.dk.at(b.key_row(item, j), item.head);
    float* dv_out = b.dv.at(b.key_row(item, j), item.head);
    const float* dk_j = dk + j * ld;
    const float* dv_j = dv + j * ld;
    if (!item.shared) {
      for (int c = 0; c < dim; ++c) dk_out[c] += dk_j[c] * to_natural, dv_out[c] += dv_j[c];
      continue;
    }
    for (int c = 0; c < dim; ++c) {
#pragma omp atomic
      dk_out[c] += dk_j[c] * to_natural;
#pragma omp atomic
      dv_out[c] += dv_j[c];
    }
  }
}

// dK/dV for one key tile of one kv head: row-major scores S[query][key] (vectors along the keys),
// then dV[j] += sum_i P[i][j] dO[i] and dK[j] += sum_i dS[i][j] Q[i] broadcast P and dS against dO's
// and Q's rows, a 64-column strip at a time.
template <class Isa, class T>
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
  load_transposed<Isa>(k_t, b.k_rows + b.k_first(item.rows.row, item.head), ld, nk, dim, 1.0f);
  load_transposed<Isa>(v_t, b.v_rows + b.k_first(item.rows.row, item.head), ld, nk, dim, 1.0f);
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
    gemm<Isa>({w.s.data(), kTile, qs, ld, 1, k_t, kTile, dim, nq, &next_q}, false);  // S = Q K^T
    mask_scores<Isa>(w.s.data(), false, mask, task.doc_len, {position, position + nq}, keys, kind);
    gemm<Isa>({w.dp.data(), kTile, d_o, ld, 1, v_t, kTile, dim, nq, &next_do}, false);  // dP = dO V^T
    softmax_grad_rows<Isa>(w.s.data(), w.dp.data(), nq, b.lse2 + b.row_head(row, h), b.delta + b.row_head(row, h),
                           b.q.heads);
    gemm_wide<Isa>({dv, ld, w.s.data(), 1, kTile, d_o, ld, nq, nk}, ld, true);  // dV += P^T dO
    gemm_wide<Isa>({dk, ld, w.dp.data(), 1, kTile, qs, ld, nq, nk}, ld, true);  // dK += dS^T Q
  }
  add_key_rows(b, index, item, w);
}

// dK/dV for one chunk of gathered columns: as key_item, against every query tile of the set's heads,
// each row under gathered_row_bits (the columns it sees that the grid did not compute).
template <class Isa, class T>
FULCRUM_INLINE void column_item(const Backward<T>& b, std::size_t index, const WorkItem& item, Scratch& w) {
  const HeadColumns& columns = b.columns->sets()[static_cast<std::size_t>(item.columns)];
  const AttentionTask& task = b.tasks[item.task];
  const int dim = b.q.dim;
  const long ld = padded_dim(dim);
  const Tokens nk = item.rows.count;
  const int chunk = static_cast<int>(item.rows.row / kTile);
  load_transposed<Isa>(w.a_t.data(), columns.k + item.rows.row * ld, ld, nk, dim, 1.0f);
  load_transposed<Isa>(w.b_t.data(), columns.v + item.rows.row * ld, ld, nk, dim, 1.0f);
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
        gemm<Isa>({w.s.data(), kTile, qs, ld, 1, w.a_t.data(), kTile, dim, nq}, false);  // S = Q K^T
        mask_rows<Isa>(w.s.data(), false, nq, static_cast<int>(nk), [&](Tokens i) { return bits[i]; });
        gemm<Isa>({w.dp.data(), kTile, d_o, ld, 1, w.b_t.data(), kTile, dim, nq}, false);  // dP = dO V^T
        softmax_grad_rows<Isa>(w.s.data(), w.dp.data(), nq, b.lse2 + b.row_head(row, h), b.delta + b.row_head(row, h),
                               b.q.heads);
        gemm_wide<Isa>({w.acc_b.data(), ld, w.s.data(), 1, kTile, d_o, ld, nq, nk}, ld, true);  // dV += P^T dO
        gemm_wide<Isa>({w.acc_a.data(), ld, w.dp.data(), 1, kTile, qs, ld, nq, nk}, ld, true);  // dK += dS^T Q
      }
    }
  }
  add_key_rows(b, index, item, w);
}

// dQ for one query tile of one q head: transposed scores as in the forward pass, then
// dQ[i] += sum_j dS^T[j][i] K[j] broadcasts dS^T against K's rows.
template <class Isa, class T>
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
  load_transposed<Isa>(q_t, b.q_rows + b.q_first(item.rows.row, item.head), ld, nq, dim, 1.0f);
  load_transposed<Isa>(do_t, b.do_rows + b.q_first(item.rows.row, item.head), ld, nq, dim, 1.0f);
  std::fill(w.acc_a.begin(), w.acc_a.end(), 0.0f);
  float lse2[kTile], delta[kTile];
  for (Tokens i = 0; i < kTile; ++i) {
    lse2[i] = i < nq ? b.lse2[b.row_head(item.rows.row + i, item.head)] : __builtin_inff();
    delta[i] = i < nq ? b.delta[b.row_head(item.rows.row + i, item.head)] : 0.0f;
  }

  // One K/V tile of nk rows (the grid's, or gathered columns'), masked by `mask_tile(s^T)`, while the
  // next grid tile's K and V rows are prefetched (sparse masks: far from these).
  Prefetch next_k, next_v;
  // always_inline: the products must compile into the ISA version that runs this item.
  auto add_tile = [&](const float* k_tile, const float* v_tile, Tokens nk, auto&& mask_tile) FULCRUM_LAMBDA_INLINE {
    gemm<Isa>({w.s.data(), kTile, k_tile, ld, 1, q_t, kTile, dim, nk, &next_k}, false);  // S^T = K Q^T
    mask_tile(w.s.data());
    gemm<Isa>({w.dp.data(), kTile, v_tile, ld, 1, do_t, kTile, dim, nk, &next_v}, false);  // dP^T = V dO^T
    softmax_grad_transposed<Isa>(w.s.data(), w.dp.data(), nk, lse2, delta);
    gemm_wide<Isa>({dq, ld, w.dp.data(), 1, kTile, k_tile, ld, nk, nq}, ld, true);  // dQ += dS K
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
             [&](float* s)
                 FULCRUM_LAMBDA_INLINE { mask_scores<Isa>(s, true, mask, task.doc_len, queries, keys, tile.kind); });
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
      add_tile(columns->k + c * kTile * ld, columns->v + c * kTile * ld, nk, [&](float* s) FULCRUM_LAMBDA_INLINE {
        mask_rows<Isa>(s, true, nq, static_cast<int>(nk), [&](Tokens i) { return bits[i]; });
      });
    }
  }
  for (Tokens i = 0; i < nq; ++i) {
    float* out = b.dq.at(item.rows.row + i, item.head);
    for (int c = 0; c < dim; ++c) out[c] += dq[i * ld + c] * b.scale;
  }
}

// The three kinds of work item, each compiled once per ISA (simd::dispatch).
struct KeyItem {
  template <class Isa, class T>
  FULCRUM_INLINE static void run(const Backward<T>& b, std::size_t index, const WorkItem& item, Scratch& w) {
    key_item<Isa>(b, index, item, w);
  }
};
struct ColumnItem {
  template <class Isa, class T>
  FULCRUM_INLINE static void run(const Backward<T>& b, std::size_t index, const WorkItem& item, Scratch& w) {
    column_item<Isa>(b, index, item, w);
  }
};
struct QueryItem {
  template <class Isa, class T>
  FULCRUM_INLINE static void run(const Backward<T>& b, std::size_t index, const WorkItem& item, Scratch& w) {
    query_item<Isa>(b, index, item, w);
  }
};

template <class Item, class T>
void run_items(const std::vector<WorkItem>& items, int dim, const Backward<T>& b) {
  const auto n = static_cast<std::ptrdiff_t>(items.size());
  const fulcrum::simd::Isa isa = fulcrum::simd::active_isa();
#pragma omp parallel
  {
    Scratch scratch(dim, padded_dim(dim));
#pragma omp for schedule(dynamic, 1)
    for (std::ptrdiff_t i = 0; i < n; ++i) {
      dispatch<Item>(isa, b, static_cast<std::size_t>(i), items[static_cast<std::size_t>(i)], scratch);
    }
  }
}

// Where each shared key item's partial goes (-1: not shared, it adds in place), and the floats needed.
std::ptrdiff_t place_partials(const std::vector<WorkItem>& items, int dim, std::vector<std::ptrdiff_t>& at) {
  at.assign(items.size(), -1);
  std::ptrdiff_t floats = 0;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (!items[i].shared) continue;
    at[i] = floats;
    floats += 2 * items[i].rows.count * dim;
  }
  return floats;
}

// Adds the partials into dK/dV group by group: key tiles task by task (in task order, then any order
// inside a task: one task's key tiles of one head never overlap), gathered columns set by set (one
// set's chunks never overlap), so each element's sum has one order at any thread count.
template <class T>
void add_partials(const Backward<T>& b, const std::vector<WorkItem>& items) {
  auto group_of = [&](std::size_t i) { return items[i].columns < 0 ? items[i].task : items[i].columns; };
  std::vector<std::size_t> shared;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (b.partial_at[i] >= 0) shared.push_back(i);
  }
  std::sort(shared.begin(), shared.end(), [&](std::size_t x, std::size_t y) { return group_of(x) < group_of(y); });
  std::vector<std::size_t> group_begin;  // positions in `shared` where a new group starts, then the end
  for (std::size_t g = 0; g < shared.size(); ++g) {
    if (g == 0 || group_of(shared[g]) != group_of(shared[g - 1])) group_begin.push_back(g);
  }
  group_begin.push_back(shared.size());
  const int dim = b.dk.dim;
#pragma omp parallel
  for (std::size_t g = 0; g + 1 < group_begin.size(); ++g) {
    const auto first = static_cast<std::ptrdiff_t>(group_begin[g]);
    const auto last = static_cast<std::ptrdiff_t>(group_begin[g + 1]);
#pragma omp for schedule(static)
    for (std::ptrdiff_t s = first; s < last; ++s) {
      const std::size_t i = shared[static_cast<std::size_t>(s)];
      const WorkItem& item = items[i];
      const float* dk_part = b.partials + b.partial_at[i];
      const float* dv_part = dk_part + item.rows.count * dim;
      for (Tokens j = 0; j < item.rows.count; ++j) {
        float* dk_out = b.dk.at(b.key_row(item, j), item.head);
        float* dv_out = b.dv.at(b.key_row(item, j), item.head);
        for (int c = 0; c < dim; ++c) dk_out[c] += dk_part[j * dim + c], dv_out[c] += dv_part[j * dim + c];
      }
    }  // the implicit barrier orders the groups
  }
}

template <class T>
void run_backward(std::span<const AttentionTask> tasks, const AttentionShape& shape, HeadTensor<const T> q,
                  HeadTensor<const T> k, HeadTensor<const T> v, HeadTensor<const T> o, HeadTensor<const T> d_o,
                  HeadTensor<const float> lse, HeadTensor<float> dq, HeadTensor<float> dk, HeadTensor<float> dv) {
  // Per (row, head): LSE in base 2 and D = rowsum(dO * O), for the rows and heads the tasks name (O
  // and LSE of other heads may be undefined).
  const std::size_t cells = static_cast<std::size_t>(q.rows) * shape.q_heads;
  std::vector<float> lse2(cells), delta(cells);
  struct Cells {
    RowSpan rows;
    int h0, h1;
  };
  std::vector<Cells> ranges;
  for (const auto& t : tasks) {
    for (const auto& r : t.queries) {
      if (r.count > 0) ranges.push_back({r, t.heads.first(), t.heads.last(shape.q_heads)});
    }
  }
  const auto n_ranges = static_cast<std::ptrdiff_t>(ranges.size());
#pragma omp parallel for schedule(dynamic, 1)
  for (std::ptrdiff_t ri = 0; ri < n_ranges; ++ri) {
    const Cells& cr = ranges[static_cast<std::size_t>(ri)];
    const RowSpan& r = cr.rows;
    for (Tokens row = r.row; row < r.row + r.count; ++row) {
      for (int h = cr.h0; h < cr.h1; ++h) {
        const std::size_t cell = static_cast<std::size_t>(row) * shape.q_heads + h;
        const float l = *lse.at(row, h);
        lse2[cell] = std::isinf(l) && l < 0 ? __builtin_inff() : l * std::numbers::log2e_v<float>;
        float sum = 0;
        for (int c = 0; c < shape.head_dim; ++c) sum += to_float(o.at(row, h)[c]) * to_float(d_o.at(row, h)[c]);
        delta[cell] = sum;
      }
    }
  }

  const float scale_log2 = shape.softmax_scale() * std::numbers::log2e_v<float>;
  const float* k_rows = head_major(k, 2);
  const float* v_rows = head_major(v, 3);
  const CallColumns columns(tasks, shape.q_heads, shape.kv_heads, k_rows, v_rows, k.rows, padded_dim(shape.head_dim));
  Backward<T> b{tasks,
                q,
                k,
                v,
                d_o,
                dq,
                dk,
                dv,
                lse2.data(),
                delta.data(),
                head_major(q, 0, scale_log2),
                head_major(d_o, 1),
                k_rows,
                v_rows,
                &columns,
                shape.q_heads / shape.kv_heads,
                shape.softmax_scale()};
  // dK/dV in two passes, the grid's key tiles then the gathered columns, which add into some of the
  // same rows: one pass's items never meet the other's.
  std::vector<std::ptrdiff_t> partial_at;
  auto key_pass = [&](const std::vector<WorkItem>& items, auto item) {
    if (shape.deterministic) {
      const std::ptrdiff_t floats = place_partials(items, shape.head_dim, partial_at);
      b.partials = partials_workspace(static_cast<std::size_t>(floats));
      b.partial_at = partial_at.data();
    }
    run_items<decltype(item)>(items, shape.head_dim, b);
    if (shape.deterministic) add_partials(b, items);
  };
  key_pass(key_tiles(tasks, shape.q_heads, shape.kv_heads), KeyItem{});
  key_pass(column_tiles(tasks, columns, shape.q_heads, shape.kv_heads), ColumnItem{});
  run_items<QueryItem>(query_tiles(tasks, shape.q_heads), shape.head_dim, b);
}

}  // namespace

template <class T>
void attention_backward(std::span<const AttentionTask> tasks, const AttentionShape& shape, HeadTensor<const T> q,
                        HeadTensor<const T> k, HeadTensor<const T> v, HeadTensor<const T> o, HeadTensor<const T> d_o,
                        HeadTensor<const float> lse, HeadTensor<float> dq, HeadTensor<float> dk, HeadTensor<float> dv) {
  shape.validate();
  check_shape("q", q, q.rows, shape.q_heads, shape.head_dim);
  check_shape("k", k, k.rows, shape.kv_heads, shape.head_dim);
  check_shape("v", v, k.rows, shape.kv_heads, shape.head_dim);
  check_shape("o", o, q.rows, shape.q_heads, shape.head_dim);
  check_shape("d_o", d_o, q.rows, shape.q_heads, shape.head_dim);
  check_shape("lse", lse, q.rows, shape.q_heads, 1);
  check_shape("dq", dq, q.rows, shape.q_heads, shape.head_dim);
  check_shape("dk", dk, k.rows, shape.kv_heads, shape.head_dim);
  check_shape("dv", dv, k.rows, shape.kv_heads, shape.head_dim);
  validate_tasks(tasks, q.rows, k.rows, shape.q_heads);
  const BackwardKernel<T> kernel = [&](HeadTensor<const T> q_in, HeadTensor<const T> k_in, HeadTensor<const T> v_in,
                                       HeadTensor<const T> o_in, HeadTensor<const T> d_o_in,
                                       HeadTensor<const float> lse_in) {
    run_backward<T>(tasks, shape, q_in, k_in, v_in, o_in, d_o_in, lse_in, dq, dk, dv);
  };
  if (!backward_with_non_finite<T>(tasks, shape, q, k, v, o, d_o, lse, dq, dk, dv, kernel))
    kernel(q, k, v, o, d_o, lse);
}

template void attention_backward<float>(std::span<const AttentionTask>, const AttentionShape&, HeadTensor<const float>,
                                        HeadTensor<const float>, HeadTensor<const float>, HeadTensor<const float>,
                                        HeadTensor<const float>, HeadTensor<const float>, HeadTensor<float>,
                                        HeadTensor<float>, HeadTensor<float>);
template void attention_backward<BFloat16>(std::span<const AttentionTask>, const AttentionShape&,
                                           HeadTensor<const BFloat16>, HeadTensor<const BFloat16>,
                                           HeadTensor<const BFloat16>, HeadTensor<const BFloat16>,
                                           HeadTensor<const BFloat16>, HeadTensor<const float>, HeadTensor<float>,
                                           HeadTensor<float>, HeadTensor<float>);

}  // namespace fulcrum::kernels
