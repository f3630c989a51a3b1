// MaskSpec: which keys each query row of a document may attend to. Planners, the cost model, the
// verifier and (later) the kernels all ask the mask the same questions, so they can never disagree.
//
// Every mask here is a union of "band" constraints  k <= q + c  (c = 0 for causal, c = -w for the far
// edge of a window of w keys), clipped to key ranges. That gives closed-form pair counts over any
// (query range x key range) rectangle, and a finite set of rows where the visible set changes shape,
// which is what lets plan::verify check exact coverage without visiting every (q, k) pair.
#pragma once

#include "fulcrum/core/interval.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace fulcrum {

enum class MaskKind { kCausal, kFull, kSlidingWindow, kLambda };

/// Whether a (query tile x key tile) rectangle has no visible pair, all pairs visible, or some.
enum class TileKind { kEmpty, kFull, kPartial };

struct MaskSpec {
  MaskKind kind = MaskKind::kCausal;
  Tokens window = 0;  // keys a row sees back from itself (itself included): sliding window, lambda
  Tokens sink = 0;    // leading keys every row sees: lambda

  static MaskSpec causal() { return {}; }
  static MaskSpec full() { return {MaskKind::kFull, 0, 0}; }
  static MaskSpec sliding_window(Tokens window);
  static MaskSpec lambda(Tokens sink, Tokens window);
  /// Parses "causal", "full", "window:W", "lambda:SINK:WINDOW"; errors name the field `mask`.
  static MaskSpec parse(std::string_view text);
  std::string to_string() const;

  /// Keys visible to row q of a document of doc_len tokens: at most two disjoint sorted ranges.
  SmallRanges visible(Tokens q, Tokens doc_len) const;
  /// Number of visible (q, k) pairs with q in `queries` and k in `keys`. Exact, O(1).
  Tokens count_pairs(Range queries, Range keys, Tokens doc_len) const;
  /// Visible pairs of the whole document.
  Tokens document_pairs(Tokens doc_len) const { return count_pairs({0, doc_len}, {0, doc_len}, doc_len); }
  /// The keys of `keys` that some row of `queries` can see: what a task reading `keys` must fetch.
  SmallRanges keys_needed(Range queries, Range keys, Tokens doc_len) const;
  TileKind classify(Range queries, Range keys, Tokens doc_len) const;
  /// Rows q at which the shape of visible(q) ∩ keys can change, for key-range boundaries `key_edges`.
  /// Between consecutive such rows every visible-range endpoint moves linearly with q.
  std::vector<Tokens> row_breakpoints(const std::vector<Tokens>& key_edges, Tokens doc_len) const;

  friend bool operator==(const MaskSpec&, const MaskSpec&) = default;
};

}  // namespace fulcrum
