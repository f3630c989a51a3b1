#include "fulcrum/planners/distca/shard.hpp"

#include "fulcrum/planners/planner.hpp"

#include <algorithm>
#include <cmath>
#include <span>

namespace fulcrum::distca {
namespace {

Tokens missing_tokens(const RangeSet* have, Range r) { return have == nullptr ? r.size() : have->count_missing(r); }

// The largest multiple of `granularity` in [0, limit] whose `flops(size)` fits the budget (flops grows
// with size). Pair counts of a row block are quadratic in its size under causal and full masks, so a
// quadratic through the first granule and the whole limit guesses the answer exactly there; a short
// walk from the guess corrects it for other masks, and bisection takes over if the walk runs long.
template <typename FlopsOfSize>
Tokens largest_fitting(Tokens limit, Tokens granularity, double budget, const FlopsOfSize& flops) {
  const Tokens n = limit / granularity;  // candidate sizes are k * granularity, k in [0, n]
  if (n == 0 || flops(granularity) > budget) return 0;
  const double f1 = flops(granularity), fn = flops(n * granularity);
  if (fn <= budget) return n * granularity;
  // f(k) ~ alpha k + beta k^2 through k = 1 and k = n.
  const double nn = static_cast<double>(n);
  const double beta = n > 1 ? (fn - nn * f1) / (nn * nn - nn) : 0.0;
  const double alpha = f1 - beta;
  double guess = beta > 1e-12 * std::abs(alpha) ? (-alpha + std::sqrt(alpha * alpha + 4 * beta * budget)) / (2 * beta)
                                                : budget / alpha;
  Tokens k = std::clamp<Tokens>(static_cast<Tokens>(guess), 1, n - 1);
  Tokens lo = 1, hi = n - 1;  // f(lo) fits; f(hi + 1) does not
  for (int step = 0; step < 4; ++step) {
    if (flops(k * granularity) > budget) {
      hi = k - 1;
      k = std::max(lo, k - 1);
    } else if (k == hi || flops((k + 1) * granularity) > budget) {
      return k * granularity;
    } else {
      lo = k + 1;
      k = lo;
    }
  }
  while (lo < hi) {
    const Tokens mid = (lo + hi + 1) / 2;
    if (flops(mid * granularity) <= budget) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo * granularity;
}

}  // namespace

double shard_bytes(const Document& doc, const std::array<Range, 2>& rows, const TokenBytes& bytes,
                   const DestinationView& dest, Range keys) {
  double total = 0;
  SmallRanges needed;
  const Range clip = intersect(keys, {0, doc.length});
  for (const auto& r : rows) {
    if (r.empty()) continue;
    total += (bytes.q + bytes.output()) * static_cast<double>(missing_tokens(dest.owned, r));
    for (const auto& k : doc.planning_mask().keys_needed(r, clip, doc.length)) needed.push(k);
  }
  needed.normalize();
  for (const auto& k : needed) total += bytes.kv * static_cast<double>(missing_tokens(dest.keys, k));
  return total;
}

Shard best_shard(const ModelShape& model, const Document& doc, const Item& item, double budget_flops,
                 const ShardRules& rules, const DestinationView& dest) {
  const auto bytes = token_bytes(model);
  const Range r = item.rows[0];
  const Range keys = item.keys;
  auto make = [&](Range head, Range tail, Range shard_keys, bool whole, bool key_cut, Range kept = {}) {
    Shard s{{head, tail}, shard_keys, 0, 0, whole, key_cut, kept};
    s.flops = rows_flops(model, doc, head, shard_keys) + rows_flops(model, doc, tail, shard_keys);
    s.bytes = shard_bytes(doc, s.rows, bytes, dest, shard_keys);
    return s;
  };
  if (item.flops <= budget_flops) return make(r, {}, keys, true, false);

  const Tokens g = rules.granularity;
  auto head_flops = [&](Tokens h) { return rows_flops(model, doc, {r.begin, r.begin + h}, keys); };
  auto tail_flops = [&](Tokens t) { return rows_flops(model, doc, {r.end - t, r.end}, keys); };
  auto pair_flops = [&](Tokens s) { return head_flops(s) + tail_flops(s); };
  const Tokens h = largest_fitting(r.size(), g, budget_flops, head_flops);
  const Tokens t = largest_fitting(r.size(), g, budget_flops, tail_flops);
  const Tokens p = largest_fitting(r.size() / 2, g, budget_flops, pair_flops);
  // On the scheduler's inner loop: a fixed array, no allocation.
  std::array<Shard, 5> candidates{make({r.begin, r.begin + h}, {}, keys, false, false),
                                  make({}, {r.end - t, r.end}, keys, false, false),
                                  make({r.begin, r.begin + p}, {r.end - p, r.end}, keys, false, false)};
  std::size_t count = 3;
  if (rules.partial_kv) {
    // The keys the rows see, in the item's range; a cut leaves the item at least one granule of them.
    const std::array<Range, 1> rows{r};
    const Range seen = intersect(visible_key_hull(doc, rows), keys);
    auto prefix_flops = [&](Tokens m) { return rows_flops(model, doc, r, {seen.begin, seen.begin + m}); };
    auto suffix_flops = [&](Tokens m) { return rows_flops(model, doc, r, {seen.end - m, seen.end}); };
    const Tokens limit = seen.size() > g ? seen.size() - g : 0;
    const Tokens a = largest_fitting(limit, g, budget_flops, prefix_flops);
    const Tokens b = largest_fitting(limit, g, budget_flops, suffix_flops);
    if (a > 0) candidates[count++] = make(r, {}, {seen.begin, seen.begin + a}, false, true, {seen.begin + a, seen.end});
    if (b > 0) candidates[count++] = make(r, {}, {seen.end - b, seen.end}, false, true, {seen.begin, seen.end - b});
  }

  Shard best;
  for (const Shard& candidate : std::span(candidates.data(), count)) {
    if (candidate.flops <= 0) continue;
    // Fewest bytes per FLOP carried; among equals, the larger shard.
    const bool better = best.flops <= 0 || candidate.bytes * best.flops < best.bytes * candidate.flops ||
                        (candidate.bytes * best.flops == best.bytes * candidate.flops && candidate.flops > best.flops);
    if (better) best = candidate;
  }
  return best;
}

}  // namespace fulcrum::distca
