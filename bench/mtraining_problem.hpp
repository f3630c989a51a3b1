// What the two MTraining benches share (docs/performance.md, "MTraining: estimator cost and sparse
// kernel throughput"): one synthetic vertical-slash document (sparse::SyntheticAttention, one kv head),
// the estimator's per-head vsblocks masks, buffers laid out as a mask's slots say (striped masks store
// the document permuted), the kernels' active tiles, and a wall clock.
#pragma once

#include "fulcrum/kernels/attention.hpp"
#include "fulcrum/kernels/timing.hpp"
#include "fulcrum/sparse/estimator.hpp"
#include "fulcrum/sparse/synthetic_attention.hpp"
#include "fulcrum/workload/mask.hpp"

#include <chrono>
#include <cstdint>
#include <ctime>
#include <span>
#include <vector>

namespace fulcrum::bench {

/// What a sample measures: wall time, or the process's CPU time (all threads). On a shared machine a
/// single-threaded run's CPU time leaves out the time other processes hold the core; with several
/// threads it counts OpenMP's spin-waiting too.
enum class Clock { kWall, kCpu };

inline double now(Clock clock) {
  if (clock == Clock::kWall) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  }
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

template <class F>
double seconds(F&& run, Clock clock = Clock::kWall) {
  const double start = now(clock);
  run();
  return now(clock) - start;
}

/// Seconds per call of `run`, calling it until `min_seconds` have passed (at least once): short
/// kernel calls are averaged over a batch so that one sample is not a few milliseconds of noise.
template <class F>
double seconds_per_call(F&& run, double min_seconds, Clock clock = Clock::kWall) {
  int calls = 0;
  const double start = now(clock);
  do {
    run();
    ++calls;
  } while (now(clock) - start < min_seconds);
  return (now(clock) - start) / calls;
}

/// One document of `length` tokens: q_heads q heads over one kv head, token-major rows in original
/// positions (Q, K, V, dO), and every key's position, as the estimator takes them.
struct SyntheticDocument {
  SyntheticDocument(std::uint64_t seed, int q_heads, int head_dim, Tokens length);

  sparse::SyntheticAttention data;
  std::vector<float> q, k, v, d_o;
  std::vector<Tokens> positions;  // 0 .. length - 1

  Tokens length() const { return data.doc_len(); }
  int q_heads() const { return data.q_heads(); }
  int head_dim() const { return data.head_dim(); }
  /// MTraining's estimator on the whole document in one process (all q heads; OpenMP over heads).
  sparse::VerticalSlashEstimate estimate(const sparse::VerticalSlashOptions& options) const;
};

/// One vsblocks mask per q head: the masks the estimator's index becomes.
std::vector<MaskSpec> vsblocks_masks(const sparse::VerticalSlashEstimate& estimate);

/// 1 - (visible pairs / causal pairs), over all heads' masks (in original positions).
double sparsity(std::span<const MaskSpec> masks, Tokens length);

/// The tiles the kernels compute for one task over the whole document, summed over heads: the 64 x 64
/// tiles of the grid that the mask without its vertical columns leaves non-empty (partial: the full
/// mask's classify says so), plus the gathered-column tiles (one per query tile and 64-column chunk
/// that some row sees, kernels/columns.hpp; counted partial). active_pairs counts every such tile whole
/// (rows x keys), the pairs the kernel computes whether or not the mask keeps them.
struct ActiveTiles {
  double full = 0;
  double partial = 0;
  double active_pairs = 0;
};
ActiveTiles active_tiles(std::span<const MaskSpec> masks, Tokens length);

/// Q, K, V, dO of a document, stored in the slot order of `layout` (source_position; the identity for
/// unstriped masks), with outputs and gradients, and the kernels over one task covering the document.
class AttentionBuffers {
 public:
  AttentionBuffers(const SyntheticDocument& doc, const MaskSpec& layout);

  /// One task over the whole document, every head under its own mask (masks must outlive the task).
  std::vector<kernels::AttentionTask> document_task(std::span<const MaskSpec> masks) const;
  void forward(std::span<const kernels::AttentionTask> tasks);
  /// One backward call (reads O and LSE of the last forward). It adds into the gradients, which are
  /// never zeroed: their values do not matter here, and zeroing would be timed with the kernel.
  void backward(std::span<const kernels::AttentionTask> tasks);

 private:
  kernels::AttentionShape shape_;
  Tokens length_;
  std::vector<float> q_, k_, v_, d_o_, o_, lse_, dq_, dk_, dv_;
};

}  // namespace fulcrum::bench
