// Device loads under the GQA cost rule, updated head by head in O(1): what the greedy, annealing,
// local-search and branch-and-bound solvers move heads through. Agrees with device_times() (tested).
#pragma once

#include "fulcrum/planners/heads/cost_model.hpp"

#include <algorithm>
#include <cstddef>
#include <vector>

namespace fulcrum::heads {

class Loads {
 public:
  Loads(const LayerCosts& costs, int devices)
      : costs_(&costs),
        devices_(devices),
        compute_(static_cast<std::size_t>(devices), 0.0),
        groups_on_(static_cast<std::size_t>(devices), 0),
        count_(static_cast<std::size_t>(devices) * static_cast<std::size_t>(costs.groups()), 0) {}

  /// Loads of a complete assignment.
  Loads(const LayerCosts& costs, int devices, const HeadAssignment& assignment) : Loads(costs, devices) {
    for (int h = 0; h < costs.heads(); ++h) add(h, assignment[static_cast<std::size_t>(h)]);
  }

  int devices() const { return devices_; }
  /// What adding head h to device d adds to d's compute.
  double add_cost(int h, int d) const {
    return costs_->attention_s[static_cast<std::size_t>(h)] +
           (count(d, costs_->group_of(h)) == 0 ? costs_->qkvo_s : costs_->qo_s);
  }
  void add(int h, int d) {
    compute_[idx(d)] += add_cost(h, d);
    int& c = count_ref(d, costs_->group_of(h));
    groups_on_[idx(d)] += c == 0 ? 1 : 0;
    ++c;
  }
  void remove(int h, int d) {
    int& c = count_ref(d, costs_->group_of(h));
    --c;
    groups_on_[idx(d)] -= c == 0 ? 1 : 0;
    compute_[idx(d)] -= add_cost(h, d);
  }
  int count(int d, int g) const {
    return count_[idx(d) * static_cast<std::size_t>(costs_->groups()) + static_cast<std::size_t>(g)];
  }
  int groups_on(int d) const { return groups_on_[idx(d)]; }
  double compute(int d) const { return compute_[idx(d)]; }
  /// The device's time: compute, or the offload of its groups' caches when that is longer.
  double time(int d) const { return std::max(compute_[idx(d)], groups_on_[idx(d)] * costs_->offload_per_group_s); }
  /// d's time if head h were added (h not on d).
  double time_with(int h, int d) const {
    const bool new_group = count(d, costs_->group_of(h)) == 0;
    return std::max(compute_[idx(d)] + add_cost(h, d),
                    (groups_on_[idx(d)] + (new_group ? 1 : 0)) * costs_->offload_per_group_s);
  }
  /// What removing head h (on d) takes from d's compute.
  double remove_saving(int h, int d) const {
    return costs_->attention_s[static_cast<std::size_t>(h)] +
           (count(d, costs_->group_of(h)) == 1 ? costs_->qkvo_s : costs_->qo_s);
  }
  /// d's time if head `out` (on d, or -1) left and head `in` (not on d, or -1) arrived, without moving them.
  double time_exchanging(int d, int out, int in) const {
    double compute = compute_[idx(d)];
    int groups = groups_on_[idx(d)];
    int out_group = -1;
    if (out >= 0) {
      out_group = costs_->group_of(out);
      const bool last = count(d, out_group) == 1;
      compute -= costs_->attention_s[static_cast<std::size_t>(out)] + (last ? costs_->qkvo_s : costs_->qo_s);
      groups -= last ? 1 : 0;
    }
    if (in >= 0) {
      const int g = costs_->group_of(in);
      const int before = count(d, g) - (g == out_group ? 1 : 0);
      compute += costs_->attention_s[static_cast<std::size_t>(in)] + (before == 0 ? costs_->qkvo_s : costs_->qo_s);
      groups += before == 0 ? 1 : 0;
    }
    return std::max(compute, groups * costs_->offload_per_group_s);
  }
  double max_time() const {
    double m = 0;
    for (int d = 0; d < devices_; ++d) m = std::max(m, time(d));
    return m;
  }
  int argmax() const {
    int best = 0;
    for (int d = 1; d < devices_; ++d) best = time(d) > time(best) ? d : best;
    return best;
  }
  double total_compute() const {
    double s = 0;
    for (double c : compute_) s += c;
    return s;
  }

 private:
  static std::size_t idx(int d) { return static_cast<std::size_t>(d); }
  int& count_ref(int d, int g) {
    return count_[idx(d) * static_cast<std::size_t>(costs_->groups()) + static_cast<std::size_t>(g)];
  }

  const LayerCosts* costs_;
  int devices_;
  std::vector<double> compute_;
  std::vector<int> groups_on_;
  std::vector<int> count_;  // [device][group]: heads of the group on the device
};

}  // namespace fulcrum::heads
