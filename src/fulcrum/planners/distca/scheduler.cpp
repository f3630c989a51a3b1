#include "fulcrum/planners/distca/scheduler.hpp"

#include "fulcrum/cost/attention_cost.hpp"
#include "fulcrum/planners/distca/shard.hpp"

#include <algorithm>
#include <numeric>

namespace fulcrum::distca {
namespace {

// What one server holds of one document: the rows it owns and the keys it owns or has received.
struct Holding {
  int server;
  RangeSet owned;
  RangeSet keys;
};

class Scheduler {
 public:
  Scheduler(const Batch& batch, const ModelShape& model, const SchedulerOptions& options)
      : batch_(batch), model_(model), options_(options), items_(initial_items(batch, model)) {
    const auto n = static_cast<std::size_t>(batch.ranks);
    load_.assign(n, 0.0);
    closed_.assign(n, false);
    for (const auto& item : items_) {
      load_[item.server] += item.flops;
    }
    holdings_.resize(batch.documents.size());
    for (const auto& s : batch.segments) {
      Holding& h = holding(s.rank, s.doc);
      h.owned.add(s.tokens);
      h.keys.add(s.tokens);
    }
    mean_ = std::accumulate(load_.begin(), load_.end(), 0.0) / static_cast<double>(n);
    // Candidates in decreasing order of an upper bound on the E any of their shards can reach, so the
    // search can stop once the bound falls below the best E found. A shard's rows each see at most
    // doc.length keys and each cost at least its Q bytes when the destination does not own them, so
    // E <= flops_per_pair * doc.length / q_bytes. Items only shrink, so the order stays valid. (A piece
    // going back to its rows' owner costs only K/V and can beat the bound; the search may then miss it,
    // which costs a better move, never correctness.)
    const double per_pair = attention_forward_flops_per_pair(model);
    const double q_bytes = token_bytes(model).q;
    e_bound_per_token_ = per_pair / q_bytes;
    mark_initial_surplus();
  }

  ScheduleResult run() {
    int moves = 0;
    while (!balanced()) {
      const int d = largest_open_deficit();
      if (d < 0) break;
      if (!move_best_candidate_to(d)) {
        closed_[d] = true;  // nothing can move to d any more
        continue;
      }
      ++moves;
    }
    return {std::move(items_), std::move(load_), moves};
  }

 private:
  bool balanced() const {
    const double slack = options_.tolerance * mean_;
    return std::all_of(load_.begin(), load_.end(), [&](double f) { return std::abs(f - mean_) <= slack; });
  }

  int largest_open_deficit() const {
    int best = -1;
    for (int s = 0; s < batch_.ranks; ++s) {
      if (!closed_[s] && load_[s] < mean_ && (best < 0 || load_[s] < load_[best])) best = s;
    }
    return best;
  }

  Holding& holding(int server, int doc) {
    auto& list = holdings_[doc];
    for (auto& h : list) {
      if (h.server == server) return h;
    }
    list.push_back({server, {}, {}});
    return list.back();
  }

  DestinationView view_of(int server, int doc) const {
    for (const auto& h : holdings_[doc]) {
      if (h.server == server) return {&h.owned, &h.keys};
    }
    return {};
  }

  // The candidates: the contiguous items on surplus servers, by decreasing E bound. The servers above
  // the mean at the start are marked here; a destination a move pushes past the mean joins later
  // (add_candidates_of). Servers that fall below the mean keep their entries: the search skips them.
  void mark_initial_surplus() {
    surplus_.assign(load_.size(), false);
    for (std::size_t s = 0; s < load_.size(); ++s) surplus_[s] = load_[s] > mean_;
    add_candidates([&](int server) { return surplus_[server]; });
  }

  void add_candidates_of(int server) {
    surplus_[server] = true;
    add_candidates([&](int s) { return s == server; });
  }

  // Appends the contiguous items of the servers `take` names and merges them into the order by E bound:
  // a full rebuild and sort on every move that pushes a destination past the mean cost 128-161 ms at 512
  // ranks and ε 0.02, against 82-108 ms merging (measured).
  template <class Take>
  void add_candidates(const Take& take) {
    const auto old_end = static_cast<std::ptrdiff_t>(candidates_.size());
    for (std::size_t i = 0; i < items_.size(); ++i) {
      if (!take(items_[i].server) || !items_[i].rows[1].empty()) continue;
      candidates_.push_back({e_bound_per_token_ * static_cast<double>(batch_.documents[items_[i].doc].length), i});
    }
    const auto by_bound = [](const Candidate& x, const Candidate& y) { return x.e_bound > y.e_bound; };
    std::stable_sort(candidates_.begin() + old_end, candidates_.end(), by_bound);
    std::inplace_merge(candidates_.begin(), candidates_.begin() + old_end, candidates_.end(), by_bound);
  }

  // The paper's move: the best-E shard within ΔFmax = min(F_item, S_source, D_destination). When the
  // granularity makes every such shard too big (a granule of a long document's tail can outweigh a
  // small deficit), fall back to any shard that still lowers the pair's larger load, F_d + ΔF < F_s:
  // that strictly decreases Σ F², so the loop always ends, and it stops DistCA from idling on coarse
  // granules (the exhaustive-optimum test caught exactly that).
  // Fulcrum's change: the busiest server's best shard instead of the best overall when its E is at least
  // busiest_first x the best's, so that the long documents' owners shed to the large deficits in a few
  // large shards. Taking only the best E leaves them a surplus that the last, small deficits take as
  // slivers, each needing nearly the whole document's K/V from the same owners (at 512 ranks and ε 0.02,
  // 12-14 servers of one 120K-token document, most of them slivers; docs/results/2026-11-distca-traffic.md).
  bool move_best_candidate_to(int d) {
    const int busiest = options_.busiest_first < 1
                            ? static_cast<int>(std::max_element(load_.begin(), load_.end()) - load_.begin())
                            : -1;
    auto [choice, own] = best_candidates_for(d, /*improving_only=*/false, busiest);
    if (choice.e > 0 && own.e >= options_.busiest_first * choice.e) choice = own;
    if (choice.e <= 0) choice = best_candidates_for(d, /*improving_only=*/true, -1).first;
    if (choice.e <= 0) return false;
    apply(choice.item, choice.shard, d);
    if (load_[d] > mean_ && !surplus_[d]) add_candidates_of(d);
    return true;
  }

  struct Choice {
    double e = 0;  // FLOPs per byte; 0: none
    std::size_t item = 0;
    Shard shard;
  };

  // The best-E shard for deficit d of any surplus server's items, and of `busiest`'s (-1: not looked
  // for). One scan: it ends once no later candidate can beat the best, nor raise the busiest server's best
  // to the busiest_first share of the best it would have to reach.
  std::pair<Choice, Choice> best_candidates_for(int d, bool improving_only, int busiest) {
    const double deficit = mean_ - load_[d];
    // The destination may end above the mean, still inside the tolerance: one large shard of a long
    // document instead of a large one and then slivers, each of which needs nearly the whole document's
    // K/V (traffic); past the mean, the destination's own short documents become cheap candidates.
    const double overshoot = options_.overshoot * options_.tolerance * mean_;
    Choice best, own;
    for (const auto& candidate : candidates_) {
      const bool may_beat = candidate.e_bound > best.e;
      const bool may_serve_busiest =
          busiest >= 0 && candidate.e_bound > own.e && candidate.e_bound >= options_.busiest_first * best.e;
      if (!may_beat && !may_serve_busiest) break;  // the order is by decreasing E bound
      const Item& item = items_[candidate.item];
      const int s = item.server;
      const double surplus = load_[s] - mean_;
      if (surplus <= 0 || s == d || (!may_beat && s != busiest)) continue;
      // Strictly below the gap: the relative margin keeps rounding from admitting a move that only ties.
      const double limit = improving_only ? (load_[s] - load_[d]) * (1 - 1e-9) : std::min(surplus, deficit + overshoot);
      const double budget = std::min(item.flops, limit);
      const Shard shard = shard_for(candidate.item, budget, view_of(d, item.doc));
      if (shard.flops <= 0) continue;
      const double e = shard.bytes > 0 ? shard.flops / shard.bytes : std::numeric_limits<double>::infinity();
      if (e > best.e) best = {e, candidate.item, shard};
      if (s == busiest && e > own.e) own = {e, candidate.item, shard};
    }
    return {best, own};
  }

  // best_shard for a destination that holds nothing of the document depends only on the item and the
  // budget; the budget is min(F_item, S_source, D_destination), which repeats across deficits whenever
  // the destination's deficit is not the binding term. Memoising on (rows, budget) makes each move cost
  // about one evaluation per long item instead of one per item.
  Shard shard_for(std::size_t index, double budget, const DestinationView& view) {
    const Item& item = items_[index];
    const bool cacheable = view.owned == nullptr && view.keys == nullptr;
    if (cacheable && index < cache_.size()) {
      const CachedShard& c = cache_[index];
      if (c.valid && c.budget == budget && c.rows == item.rows[0] && c.keys == item.keys) return c.shard;
    }
    Shard shard =
        best_shard(model_, batch_.documents[item.doc], item, budget, {options_.granularity, options_.partial_kv}, view);
    if (cacheable) {
      if (cache_.size() <= index) cache_.resize(index + 1);
      cache_[index] = {true, budget, item.rows[0], item.keys, shard};
    }
    return shard;
  }

  void apply(std::size_t index, const Shard& shard, int d) {
    Item& source = items_[index];
    const int s = source.server;
    load_[s] -= shard.flops;
    load_[d] += shard.flops;
    const Document& doc = batch_.documents[source.doc];
    const Range clip = intersect(shard.keys, {0, doc.length});
    for (const auto& r : shard.rows) {
      for (const auto& k : doc.planning_mask().keys_needed(r, clip, doc.length)) holding(d, source.doc).keys.add(k);
    }
    Item moved{source.doc, shard.rows, d, shard.flops, shard.keys};
    if (shard.whole_item) {
      source.server = d;
      return;
    }
    if (shard.key_cut) {
      source.keys = shard.kept_keys;  // its rows against the other end of its keys, still one range
    } else {
      // The rest of the source stays contiguous between the carved head and tail.
      source.rows[0] = {source.rows[0].begin + shard.rows[0].size(), source.rows[0].end - shard.rows[1].size()};
    }
    source.flops = rows_flops(model_, doc, source.rows[0], source.keys);
    items_.push_back(moved);
  }

  struct Candidate {
    double e_bound;
    std::size_t item;
  };

  struct CachedShard {
    bool valid = false;
    double budget = 0;
    Range rows, keys;
    Shard shard;
  };

  const Batch& batch_;
  const ModelShape& model_;
  std::vector<Candidate> candidates_;  // contiguous items of surplus servers, by decreasing E bound
  std::vector<CachedShard> cache_;     // by item index
  SchedulerOptions options_;
  std::vector<Item> items_;
  std::vector<double> load_;
  std::vector<bool> closed_;
  double mean_ = 0;
  std::vector<std::vector<Holding>> holdings_;  // by document: the few servers holding any of it
  std::vector<bool> surplus_;                   // servers whose items are among the candidates
  double e_bound_per_token_ = 0;
};

}  // namespace

ScheduleResult schedule(const Batch& batch, const ModelShape& model, const SchedulerOptions& options) {
  return Scheduler(batch, model, options).run();
}

}  // namespace fulcrum::distca
