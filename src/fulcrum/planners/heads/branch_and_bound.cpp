#include "fulcrum/planners/heads/branch_and_bound.hpp"

#include "fulcrum/planners/heads/loads.hpp"

#include <algorithm>
#include <numeric>

namespace fulcrum::heads {
namespace {

class Search {
 public:
  Search(const LayerCosts& costs, int devices, const HeadAssignment& incumbent, double lower_bound,
         std::int64_t node_limit)
      : costs_(costs),
        devices_(devices),
        loads_(costs, devices),
        current_(incumbent),
        node_limit_(node_limit),
        candidates_(incumbent.size() + 1) {
    result_.device = incumbent;
    result_.time = layer_time(costs, incumbent, devices);
    // Cut at the bound itself: nothing below it exists, so once the incumbent reaches it, it is optimal.
    target_ = lower_bound * (1 + 1e-12);
    // Group by group (heaviest group first), each group's heads heaviest first: a group's pieces are
    // decided together, so devices holding no unfinished group are interchangeable when equally loaded.
    std::vector<double> weight(static_cast<std::size_t>(costs.groups()), 0.0);
    for (int h = 0; h < costs.heads(); ++h) weight[static_cast<std::size_t>(costs.group_of(h))] += attention(h);
    std::vector<int> groups(weight.size());
    std::iota(groups.begin(), groups.end(), 0);
    std::stable_sort(groups.begin(), groups.end(), [&](int a, int b) {
      return weight[static_cast<std::size_t>(a)] > weight[static_cast<std::size_t>(b)];
    });
    for (int g : groups) {
      const auto first = order_.size();
      for (int j = 0; j < costs.group_size; ++j) order_.push_back(g * costs.group_size + j);
      std::stable_sort(order_.begin() + static_cast<std::ptrdiff_t>(first), order_.end(),
                       [&](int a, int b) { return attention(a) > attention(b); });
    }
    suffix_.assign(order_.size() + 1, 0.0);
    for (std::size_t i = order_.size(); i-- > 0;) {
      const bool opens_group = i % static_cast<std::size_t>(costs.group_size) == 0;
      suffix_[i] = suffix_[i + 1] + attention(order_[i]) + costs.qo_s + (opens_group ? costs.kv_s() : 0.0);
    }
    for (auto& c : candidates_) c.reserve(static_cast<std::size_t>(devices));
  }

  BranchAndBoundResult run() {
    if (result_.time > target_) dfs(0, 0.0);
    result_.complete = !aborted_;
    result_.nodes = nodes_;
    return result_;
  }

 private:
  double attention(int h) const { return costs_.attention_s[static_cast<std::size_t>(h)]; }
  // Strictly better than the incumbent, with a relative margin so rounding cannot make a tie look better.
  double cutoff() const { return result_.time * (1 - 1e-12); }
  // Devices that behave alike for the rest of the search: the same compute, the same heads of the group
  // being placed (no other unfinished group has any), and, with offload, the same number of groups.
  bool alike(int a, int b, int g) const {
    const double ca = loads_.compute(a);
    const double cb = loads_.compute(b);
    return std::abs(ca - cb) <= 1e-12 * std::max(ca, cb) && loads_.count(a, g) == loads_.count(b, g) &&
           (costs_.offload_per_group_s == 0 || loads_.groups_on(a) == loads_.groups_on(b));
  }

  void dfs(std::size_t i, double current_max) {
    if (aborted_ || done_) return;
    if (++nodes_ > node_limit_) {
      aborted_ = true;
      return;
    }
    if (i == order_.size()) {
      result_.time = current_max;
      result_.device = current_;
      done_ = current_max <= target_;
      return;
    }
    const int h = order_[i];
    const int g = costs_.group_of(h);
    // Twin of the previous head (same group, same time): only non-decreasing devices.
    int first_device = 0;
    if (i % static_cast<std::size_t>(costs_.group_size) != 0 && attention(order_[i - 1]) == attention(h)) {
      first_device = current_[static_cast<std::size_t>(order_[i - 1])];
    }
    auto& candidates = candidates_[i];
    candidates.clear();
    for (int d = first_device; d < devices_; ++d) {
      bool repeat = false;
      for (const auto& [t, e] : candidates) repeat = repeat || alike(d, e, g);
      if (repeat) continue;
      const double t = loads_.time_with(h, d);
      if (std::max(current_max, t) < cutoff()) candidates.emplace_back(t, d);
    }
    // Insertion sort: a handful of devices, and no allocation per node.
    for (std::size_t a = 1; a < candidates.size(); ++a) {
      for (std::size_t b = a; b > 0 && candidates[b].first < candidates[b - 1].first; --b) {
        std::swap(candidates[b], candidates[b - 1]);
      }
    }
    for (const auto& [t, d] : candidates) {
      if (std::max(current_max, t) >= cutoff()) continue;  // the incumbent improved meanwhile
      loads_.add(h, d);
      current_[static_cast<std::size_t>(h)] = d;
      // Placed compute plus what is left, each unopened group paying its K/V projection once, over D.
      const double placed = loads_.total_compute();
      if ((placed + suffix_[i + 1]) / devices_ < cutoff()) dfs(i + 1, std::max(current_max, t));
      loads_.remove(h, d);
      if (aborted_ || done_) break;
    }
  }

  const LayerCosts& costs_;
  int devices_;
  Loads loads_;
  HeadAssignment current_;
  std::vector<int> order_;
  std::vector<double> suffix_;  // Σ (t_attn + t_qo) of order_[i..], plus a K/V projection per group opened there
  std::int64_t node_limit_;
  std::int64_t nodes_ = 0;
  double target_ = 0;
  bool aborted_ = false;
  bool done_ = false;
  std::vector<std::vector<std::pair<double, int>>> candidates_;  // per depth, reused
  BranchAndBoundResult result_;
};

}  // namespace

BranchAndBoundResult branch_and_bound(const LayerCosts& costs, int devices, const HeadAssignment& incumbent,
                                      double lower_bound, std::int64_t node_limit) {
  return Search(costs, devices, incumbent, lower_bound, node_limit).run();
}

}  // namespace fulcrum::heads
