// DCP's blocks: every document cut into data blocks of B tokens (their Q, K/V, O and LSE stay
// together on one device, every head of a row), and computation blocks per (q-block, kv-block) pair
// whose mask tile is not empty, each cut into H head blocks (the dcp-head-blocks option), weighted by
// its exact FLOPs (partial tiles counted pair by pair through the mask) times its share of the heads.
//
// A head block holds q_heads / H consecutive q heads and whole GQA groups (H divides kv_heads), so it
// reads exactly kv_heads / H kv heads: its Q, K/V, O and LSE bytes are the whole row's over H, and
// two head blocks never read the same K/V. H = 1 is the whole tile over all heads (tasks without a
// head range), exactly what DCP planned before head blocks existed.
#pragma once

#include "fulcrum/core/interval.hpp"
#include "fulcrum/cost/attention_cost.hpp"
#include "fulcrum/planners/dcp/hypergraph.hpp"
#include "fulcrum/workload/batch.hpp"
#include "fulcrum/workload/model_shape.hpp"

#include <limits>
#include <vector>

namespace fulcrum::dcp {

struct DataBlock {
  int doc = 0;
  Range tokens;
};

struct ComputeBlock {
  int q_block = 0;     // index into Blocks::data
  int kv_block = 0;    // index into Blocks::data, same document
  double flops = 0;    // forward, exact under the mask, over this head block's heads
  int head_block = 0;  // in [0, Blocks::head_blocks)
};

struct Blocks {
  std::vector<DataBlock> data;  // in (doc, tokens) order
  /// In (q_block, head_block, kv_block) order: the tiles of one row and head block are neighbours,
  /// as the row-run nets of placement_hypergraph and the planner's merging of a row's tiles need.
  std::vector<ComputeBlock> compute;
  int head_blocks = 1;
  int q_heads = 0;  // the model's

  /// The q heads of `block`: all heads (no range) when there is one head block.
  HeadRange heads(const ComputeBlock& block) const;
};

/// The most computation blocks DCP plans, as estimated up front: its hypergraph partitioning takes
/// about two minutes at 350,000 blocks (and memory grows with them), so larger batches are refused
/// before any work instead of running for hours or out of memory.
inline constexpr double kMaxTileEstimate = 1 << 19;
/// An upper bound on the computation blocks of `batch`: per document (its blocks)^2, times head blocks.
double tile_estimate(const Batch& batch, Tokens block_tokens, int head_blocks);
/// Throws a bad-input Error naming dcp-block, the estimate and the smallest block that fits, when
/// tile_estimate exceeds kMaxTileEstimate.
void check_block_count(const Batch& batch, Tokens block_tokens, int head_blocks);

/// Throws a bad-input Error naming the dcp-head-blocks option unless `head_blocks` divides the model's
/// kv heads (so it divides its q heads and every head block holds whole GQA groups).
void check_head_blocks(int head_blocks, const ModelShape& model);

/// Bytes per token of one head block's share of Q, K/V, O and LSE: the row's over `head_blocks` (exact,
/// since head blocks hold whole GQA groups). One head block gives token_bytes(model) unchanged.
TokenBytes head_block_token_bytes(const ModelShape& model, int head_blocks);

/// Blocks of `block_tokens` tokens (a document's last block may be shorter), every non-empty tile cut
/// into `head_blocks` head blocks (check_head_blocks). A tile counts as not empty when some row sees
/// some key of it as the planners ask (index-list masks: by their causal hull, so the tasks tile the
/// hull as plan::verify requires); its FLOPs are exact, split evenly over its head blocks (DCP plans by
/// Document::mask, the same for every head).
Blocks make_blocks(const Batch& batch, Tokens block_tokens, const ModelShape& model, int head_blocks = 1);

/// How large make_blocks' output would be, without making it: computation blocks (non-empty tiles times
/// head blocks, counted from each block row's needed keys: the same tiles as make_blocks) and the most
/// blocks one document has (the largest nets: a row's or a column's tiles). Counting stops as soon as a
/// count passes `stop_above` (`complete` false: `compute` is then a lower bound, 0 when the longest
/// document is already past its bound), so sizing a batch far beyond the bounds costs O(documents) plus
/// at most stop_above.longest_document block rows per document, whatever the block size.
struct BlockCounts {
  double compute = 0;
  Tokens longest_document = 0;
  bool complete = true;
};
inline constexpr BlockCounts kCountEverything{std::numeric_limits<double>::infinity(),
                                              std::numeric_limits<Tokens>::max(), true};
BlockCounts count_blocks(const Batch& batch, Tokens block_tokens, int head_blocks = 1,
                         const BlockCounts& stop_above = kCountEverything);

/// The placement hypergraph. Vertices: computation blocks [0, C) weighted by (FLOPs, 0), then data
/// blocks [C, C + D) weighted by (0, bytes held: Q, K/V, O and LSE of every head). Nets, two per data
/// block and head block: its Q/O net joins it with the computation blocks of its rows and that head
/// block (Q goes there, O and LSE come back, weight tokens · (q + o + lse) bytes of those heads) and its
/// K/V net with those of that head block reading its keys (weight tokens · kv bytes of the kv heads
/// they read). A device runs each unbroken run of a row's tiles of one head block as one task, fetching
/// Q and returning O per run, so a 2-pin net of weight tokens · (q + o + lse) bytes of those heads joins
/// each pair of neighbouring tiles of a row and head block: every break between runs costs its Q + O
/// again. Σ w(e)(λ − 1) then follows the bytes a placement moves when messages carry only the heads a
/// task reads (up to the first run's Q + O on each device, counted twice).
Hypergraph placement_hypergraph(const Blocks& blocks, const ModelShape& model);

}  // namespace fulcrum::dcp
