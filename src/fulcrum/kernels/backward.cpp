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

// The three kinds of work item.
enum class ItemKind { kKey, kColumn, kQuery };

#define FULCRUM_ISA_INCLUDE "fulcrum/kernels/backward_items-inl.hpp"
#include "fulcrum/core/simd_foreach_isa.hpp"

template <class T>
void run_items(const std::vector<WorkItem>& items, int dim, const Backward<T>& b, ItemKind kind) {
  const auto n = static_cast<std::ptrdiff_t>(items.size());
  const fulcrum::simd::Isa isa = fulcrum::simd::active_isa();
#pragma omp parallel
  {
    Scratch scratch(dim, padded_dim(dim));
#pragma omp for schedule(dynamic, 1)
    for (std::ptrdiff_t i = 0; i < n; ++i) {
      FULCRUM_DISPATCH(
          isa, backward_item(kind, b, static_cast<std::size_t>(i), items[static_cast<std::size_t>(i)], scratch));
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
  auto key_pass = [&](const std::vector<WorkItem>& items, ItemKind kind) {
    if (shape.deterministic) {
      const std::ptrdiff_t floats = place_partials(items, shape.head_dim, partial_at);
      b.partials = partials_workspace(static_cast<std::size_t>(floats));
      b.partial_at = partial_at.data();
    }
    run_items(items, shape.head_dim, b, kind);
    if (shape.deterministic) add_partials(b, items);
  };
  key_pass(key_tiles(tasks, shape.q_heads, shape.kv_heads), ItemKind::kKey);
  key_pass(column_tiles(tasks, columns, shape.q_heads, shape.kv_heads), ItemKind::kColumn);
  run_items(query_tiles(tasks, shape.q_heads), shape.head_dim, b, ItemKind::kQuery);
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
