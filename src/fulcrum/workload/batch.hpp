// Documents, batches and the DistCA packing: documents placed in order into equal per-rank token
// budgets, a document that overflows a budget split across ranks.
#pragma once

#include "fulcrum/core/interval.hpp"
#include "fulcrum/workload/mask.hpp"

#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

namespace fulcrum {

struct Document {
  std::int64_t id = 0;  // unique within a stream of batches
  Tokens length = 0;
  MaskSpec mask;
  /// Empty: `mask` for every q head. Otherwise one mask per q head (validate_head_masks), and `mask`
  /// is only a label (planners that predate per-head masks balance by it).
  std::vector<MaskSpec> head_masks{};

  const MaskSpec& mask_of(int head) const {
    return head_masks.empty() ? mask : head_masks[static_cast<std::size_t>(head)];
  }
  /// The mask planners place work over: `mask`, or with per-head masks one whose planning hull holds every head's:
  /// `mask` when it does (full and striped hold any; causal and index-list masks every head that sees only keys at
  /// or before its row), else causal when every head sees only such keys, else full. Each head's own mask then
  /// decides which pairs of a task the kernels compute.
  const MaskSpec& planning_mask() const;
};

/// Tokens [tokens.begin, tokens.end) of document `doc` (an index into Batch::documents) live on `rank`:
/// that rank runs their context-independent layers and holds their Q, K, V and O.
struct Segment {
  int doc = 0;
  Range tokens;
  int rank = 0;
};

struct Batch {
  int ranks = 0;
  Tokens tokens_per_rank = 0;
  std::vector<Document> documents;
  std::vector<Segment> segments;  // sorted by (doc, tokens.begin); they tile every document exactly

  Tokens total_tokens() const;
  /// The segments of one document, in token order (a view into `segments`).
  std::span<const Segment> segments_of(int doc) const;
  /// The segments of `doc` that hold some token of `tokens`, in token order (a binary search: it relies
  /// on the segments' order).
  std::span<const Segment> segments_overlapping(int doc, Range tokens) const;
};

/// How a document that crosses rank boundaries is laid over its ranks. Each rank keeps the number of its
/// tokens the order gives it either way.
/// - kContiguous: one piece per rank, cut at the boundaries.
/// - kHeadTail (DistCA's packing): the i-th of the document's ranks holds the i-th chunk from its start and
///   the i-th chunk from its end, about half each (the head piece a multiple of 64 tokens), so every rank
///   holds some of the document's cheap first rows and some of its costly last ones.
enum class BoundarySplit { kContiguous, kHeadTail };
/// "contiguous" | "head-tail"; anything else is bad input naming `field`.
BoundarySplit parse_boundary_split(std::string_view text, std::string_view field = "boundary-split");
const char* to_string(BoundarySplit split);

/// Packs documents in order into `ranks` budgets of `tokens_per_rank`, a document that crosses a rank
/// boundary split across those ranks as `split` says. Documents that do not all fit are an error naming
/// the first one cut: nothing is dropped (a BatchStream carries what does not fit into its next batch).
Batch pack_batch(const std::vector<Document>& documents, int ranks, Tokens tokens_per_rank,
                 BoundarySplit split = BoundarySplit::kContiguous);

/// Exactly the layout a data loader produced: rank r holds whole documents of lengths
/// `lengths_per_rank[r]`, in that order (FlashAttention's varlen layout, one cu_seqlens per rank). A
/// document is never split across ranks here. Every length must be >= 1 and each rank's total at most
/// `tokens_per_rank` (0: the largest rank total); errors name the field, e.g. "lengths[1][3]".
/// Documents get ids first_id, first_id + 1, ... in rank order, each with `mask`.
Batch batch_from_rank_layout(const std::vector<std::vector<Tokens>>& lengths_per_rank, Tokens tokens_per_rank,
                             const MaskSpec& mask, std::int64_t first_id = 0);

/// Checks ranks >= 1 and tokens_per_rank >= 1 with field-naming errors.
void validate_batch_shape(int ranks, Tokens tokens_per_rank);

/// An endless, seeded stream of batches: draws lengths from a source, packs them, and carries the part
/// of a document cut at a batch's end into the next batch as a new document.
class BatchStream {
 public:
  using LengthFn = std::function<Tokens()>;
  BatchStream(LengthFn next_length, int ranks, Tokens tokens_per_rank, MaskSpec mask = MaskSpec::causal(),
              BoundarySplit split = BoundarySplit::kContiguous);
  Batch next();

 private:
  LengthFn next_length_;
  int ranks_;
  Tokens tokens_per_rank_;
  MaskSpec mask_;
  BoundarySplit split_;
  Tokens carried_tokens_ = 0;
  std::int64_t next_id_ = 0;
};

}  // namespace fulcrum
