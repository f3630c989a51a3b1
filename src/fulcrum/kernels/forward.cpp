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

#include <atomic>
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
  const CallColumns* columns;         // gathered columns of masks that have them
  int group = 1;                      // q heads per kv head
  float scale_log2;                   // softmax scale * log2(e): scores in base 2
  std::atomic<bool>* met_non_finite;  // set by an item that computed a NaN or infinite score or output
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

#define FULCRUM_ISA_INCLUDE "fulcrum/kernels/forward_items-inl.hpp"
#include "fulcrum/core/simd_foreach_isa.hpp"

// Returns false when some score or output was NaN or infinite (the outputs are then to be redone).
template <class T>
bool run_forward(std::span<const AttentionTask> tasks, const AttentionShape& shape, HeadTensor<const T> q,
                 HeadTensor<const T> k, HeadTensor<const T> v, HeadTensor<T> o, HeadTensor<float> lse) {
  const float* k_rows = head_major(k, 0);
  const float* v_rows = head_major(v, 1);
  const CallColumns columns(tasks, shape.q_heads, shape.kv_heads, k_rows, v_rows, k.rows, padded_dim(shape.head_dim));
  std::atomic<bool> met_non_finite{false};
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
                     shape.softmax_scale() * std::numbers::log2e_v<float>,
                     &met_non_finite};
  const std::vector<WorkItem> items = query_tiles(tasks, shape.q_heads, kBlockTiles * kTile);
  const auto n = static_cast<std::ptrdiff_t>(items.size());
  const fulcrum::simd::Isa isa = fulcrum::simd::active_isa();
#pragma omp parallel
  {
    ForwardScratch scratch(shape.head_dim, padded_dim(shape.head_dim));
#pragma omp for schedule(dynamic, 1)
    for (std::ptrdiff_t i = 0; i < n; ++i)
      FULCRUM_DISPATCH(isa, forward_item(f, items[static_cast<std::size_t>(i)], scratch));
  }
  return !met_non_finite.load(std::memory_order_relaxed);
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
  // Inputs are not scanned up front: a non-finite Q, K or V makes a score or an output row of a tile
  // that reads it non-finite, which the items notice in cache. Only then is the call redone with the
  // non-finite values isolated (non_finite.hpp); if none is found after all (finite inputs whose
  // scores overflowed), the outputs stand as computed.
  if (run_forward<T>(tasks, shape, q, k, v, o, lse)) return;
  const ForwardKernel<T> kernel = [&](HeadTensor<const T> q_in, HeadTensor<const T> k_in, HeadTensor<const T> v_in) {
    run_forward<T>(tasks, shape, q_in, k_in, v_in, o, lse);
  };
  forward_with_non_finite<T>(tasks, shape, q, k, v, o, lse, kernel);
}

template void attention_forward<float>(std::span<const AttentionTask>, const AttentionShape&, HeadTensor<const float>,
                                       HeadTensor<const float>, HeadTensor<const float>, HeadTensor<float>,
                                       HeadTensor<float>);
template void attention_forward<BFloat16>(std::span<const AttentionTask>, const AttentionShape&,
                                          HeadTensor<const BFloat16>, HeadTensor<const BFloat16>,
                                          HeadTensor<const BFloat16>, HeadTensor<BFloat16>, HeadTensor<float>);

}  // namespace fulcrum::kernels
