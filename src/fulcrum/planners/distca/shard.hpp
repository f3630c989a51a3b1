// Step 2 of the DistCA scheduler: carving a shard that carries at most a FLOPs budget out of an Item,
// choosing among its shapes the one that costs the destination the fewest bytes.
//
// A shard takes h rows from the head and t rows from the tail of a contiguous Item, so what stays is
// still contiguous. Three shapes are tried, each as large as the budget allows at the granularity:
// head only (cheap K/V: only the prefix), tail only (the fewest rows: the densest ones), and the
// symmetric pair h = t (the shape that moves work evenly from both ends of a causal document).
#pragma once

#include "fulcrum/core/interval.hpp"
#include "fulcrum/cost/attention_cost.hpp"
#include "fulcrum/planners/distca/items.hpp"

#include <array>

namespace fulcrum::distca {

struct Shard {
  std::array<Range, 2> rows{};  // head, tail (either may be empty)
  double flops = 0;
  double bytes = 0;  // Q of the moved rows plus K/V context missing at the destination
  bool whole_item = false;
};

/// What the destination already holds of a document: rows it owns (Q needs no transfer) and keys it
/// owns or has received (K/V needs no transfer).
struct DestinationView {
  const RangeSet* owned = nullptr;  // may be null: owns nothing of the document
  const RangeSet* keys = nullptr;   // may be null: holds no K/V of the document
};

/// Bytes to bring `rows` of `doc` and the keys they see to a destination.
double shard_bytes(const Document& doc, const std::array<Range, 2>& rows, const TokenBytes& bytes,
                   const DestinationView& dest);

/// The cheapest shard of `item` (contiguous) carrying at most `budget_flops`, or a Shard with
/// flops == 0 when no shard of at least one granule fits. The whole item is taken when it fits.
Shard best_shard(const ModelShape& model, const Document& doc, const Item& item, double budget_flops,
                 Tokens granularity, const DestinationView& dest);

}  // namespace fulcrum::distca
