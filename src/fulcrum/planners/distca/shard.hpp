// Step 2 of the DistCA scheduler: carving a shard that carries at most a FLOPs budget out of an Item,
// choosing among its shapes the one that costs the destination the fewest bytes.
//
// A row shard takes h rows from the head and t rows from the tail of a contiguous Item, so what stays is
// still contiguous. Three shapes are tried, each as large as the budget allows at the granularity:
// head only (cheap K/V: only the prefix), tail only (the fewest rows: the densest ones), and the
// symmetric pair h = t (the shape that moves work evenly from both ends of a causal document).
// With key cuts on, two partial-K/V shapes join them: all the Item's rows against a prefix or a suffix
// of its keys (the rest stays, so the Item's keys are still one range). A heavy row range whose keys are
// long moves fewer bytes that way when its rows are few next to its keys, or when the destination
// already holds that end of the keys; the partial outputs merge by LSE at the rows' owner.
#pragma once

#include "fulcrum/core/interval.hpp"
#include "fulcrum/cost/attention_cost.hpp"
#include "fulcrum/planners/distca/items.hpp"

#include <array>

namespace fulcrum::distca {

struct Shard {
  std::array<Range, 2> rows{};  // head, tail (either may be empty)
  Range keys = Item::kAllKeys;  // the item's keys, or (a key cut) the prefix or suffix of them it takes
  double flops = 0;
  double bytes = 0;  // Q and the returned O+LSE of the moved rows, K/V context, that the destination lacks
  bool whole_item = false;
  bool key_cut = false;  // the item's rows against part of its keys: the item keeps its rows ...
  Range kept_keys;       // ... against these (the other end of its keys)
};

/// What the destination already holds of a document: rows it owns (Q needs no transfer) and keys it
/// owns or has received (K/V needs no transfer).
struct DestinationView {
  const RangeSet* owned = nullptr;  // may be null: owns nothing of the document
  const RangeSet* keys = nullptr;   // may be null: holds no K/V of the document
};

/// Bytes to bring `rows` of `doc` and the keys in `keys` they see to a destination, and to return their
/// outputs (O and LSE) to the rows' owner: rows the destination owns move neither way.
double shard_bytes(const Document& doc, const std::array<Range, 2>& rows, const TokenBytes& bytes,
                   const DestinationView& dest, Range keys = Item::kAllKeys);

struct ShardRules {
  Tokens granularity;  // rows (and keys of a key cut) come in multiples of this
  bool partial_kv;     // also try the partial-K/V shapes (key cuts)
};

/// The cheapest shard of `item` (contiguous) carrying at most `budget_flops`, or a Shard with
/// flops == 0 when no shard of at least one granule fits. The whole item is taken when it fits.
Shard best_shard(const ModelShape& model, const Document& doc, const Item& item, double budget_flops,
                 const ShardRules& rules, const DestinationView& dest);

}  // namespace fulcrum::distca
