// Ours: KV-group-aware LPT, descent on the critical device, then branch-and-bound (branch_and_bound.hpp).
#include "fulcrum/planners/heads/branch_and_bound.hpp"
#include "fulcrum/planners/heads/loads.hpp"
#include "fulcrum/planners/heads/solvers.hpp"

#include "fulcrum/core/random.hpp"

#include <algorithm>
#include <limits>
#include <numeric>

namespace fulcrum::heads {
namespace {

// Whole KV groups as LPT items (a group on one device pays its K/V projection once), each to the device
// that is least loaded so far.
HeadAssignment group_lpt(const LayerCosts& costs, int devices) {
  std::vector<double> weight(static_cast<std::size_t>(costs.groups()), costs.kv_s());
  for (int h = 0; h < costs.heads(); ++h) {
    weight[static_cast<std::size_t>(costs.group_of(h))] += costs.attention_s[static_cast<std::size_t>(h)] + costs.qo_s;
  }
  std::vector<int> order(weight.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return weight[static_cast<std::size_t>(a)] > weight[static_cast<std::size_t>(b)];
  });
  std::vector<double> load(static_cast<std::size_t>(devices), 0.0);
  HeadAssignment device(static_cast<std::size_t>(costs.heads()), 0);
  for (int g : order) {
    const auto d = static_cast<std::size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    load[d] += weight[static_cast<std::size_t>(g)];
    for (int j = 0; j < costs.group_size; ++j) {
      device[static_cast<std::size_t>(g) * static_cast<std::size_t>(costs.group_size) + static_cast<std::size_t>(j)] =
          static_cast<int>(d);
    }
  }
  return device;
}

// Heads leaving device c for device d (one head, or all of c's heads of one KV group), and maybe one head
// coming back from d.
struct Move {
  int head = -1;   // a head c -> d, or -1
  int group = -1;  // every head of this group on c -> d, or -1
  int back = -1;   // a head d -> c (a swap), or -1
  int d = -1;
  double value = 0;  // the score after the move
};

class Descent {
 public:
  Descent(const LayerCosts& costs, int devices, HeadAssignment& device)
      : costs_(costs), devices_(devices), device_(device), loads_(costs, devices, device) {}

  // Alternates two descents until neither moves: lowering the critical device (every step lowers it below
  // its time without raising the other device of the move to it, so the sorted device times fall), and
  // evening out any pair of devices without raising their larger time (Σ time² falls), which makes room
  // for the next critical move. Both end: each strictly improves a bounded objective over finitely many
  // assignments.
  void run() {
    for (int round = 0; round < 1000; ++round) {
      while (critical_step()) {}
      if (!balance_pairs()) return;
    }
  }

  void perturb(Rng& rng, int moves) {
    for (int k = 0; k < moves; ++k) {
      const int h = static_cast<int>(rng.uniform_int(0, costs_.heads() - 1));
      const int from = device_[static_cast<std::size_t>(h)];
      const int to = (from + 1 + static_cast<int>(rng.uniform_int(0, devices_ - 2))) % devices_;
      apply(from, Move{h, -1, -1, to, 0});
    }
  }

  double max_time() const { return loads_.max_time(); }

 private:
  bool critical_step() {
    const int c = loads_.argmax();
    Move best;
    best.value = loads_.time(c) * (1 - 1e-12);
    for (int d = 0; d < devices_; ++d) {
      if (d != c) search_pair(best, c, d, [&](double tc, double td) { return std::max(tc, td); });
    }
    if (best.d < 0) return false;
    apply(c, best);
    return true;
  }

  bool balance_pairs() {
    bool moved = false;
    for (int a = 0; a < devices_; ++a) {
      for (int b = 0; b < devices_; ++b) {
        if (a == b || loads_.time(a) <= loads_.time(b)) continue;
        const double ta = loads_.time(a);
        const double tb = loads_.time(b);
        Move best;
        best.value = (ta * ta + tb * tb) * (1 - 1e-12);
        // The pair's larger time may not grow: the layer's maximum never rises.
        search_pair(best, a, b, [&](double na, double nb) {
          return std::max(na, nb) <= ta ? na * na + nb * nb : std::numeric_limits<double>::infinity();
        });
        if (best.d >= 0) {
          apply(a, best);
          moved = true;
        }
      }
    }
    return moved;
  }

  // Every move of heads from c to d (one head, c's part of a KV group, or one head swapped for one of d's),
  // scored by `score(time c, time d)` after the move; keeps the lowest below best.value.
  template <class Score>
  void search_pair(Move& best, int c, int d, Score score) {
    on_c_.clear();
    on_d_.clear();
    for (int h = 0; h < costs_.heads(); ++h) {
      if (device_[static_cast<std::size_t>(h)] == c) on_c_.push_back(h);
      if (device_[static_cast<std::size_t>(h)] == d) on_d_.push_back(h);
    }
    for (int h : on_c_) {
      try_move(best, c, Move{h, -1, -1, d, 0}, score);
      for (int h2 : on_d_) try_move(best, c, Move{h, -1, h2, d, 0}, score);
    }
    // c's part of a KV group, moved together (saves its K/V projection once the group is whole).
    for (int g = 0; g < costs_.groups(); ++g) {
      if (loads_.count(c, g) >= 2) try_move(best, c, Move{-1, g, -1, d, 0}, score);
    }
  }

  // Moves the move's heads from `from` to `to` (and its swapped head back); apply(c, m) then undo = the
  // same with from and to exchanged.
  void shift(const Move& m, int from, int to) {
    auto move_head = [&](int h) {
      loads_.remove(h, from);
      loads_.add(h, to);
      device_[static_cast<std::size_t>(h)] = to;
    };
    if (m.head >= 0) move_head(m.head);
    if (m.group >= 0) {
      for (int h = m.group * costs_.group_size; h < (m.group + 1) * costs_.group_size; ++h) {
        if (device_[static_cast<std::size_t>(h)] == from) move_head(h);
      }
    }
    if (m.back >= 0) {
      loads_.remove(m.back, to);
      loads_.add(m.back, from);
      device_[static_cast<std::size_t>(m.back)] = from;
    }
  }
  void apply(int c, const Move& m) { shift(m, c, m.d); }
  template <class Score>
  void try_move(Move& best, int c, Move m, Score score) {
    if (m.group < 0) {  // one head, maybe swapped for one of d's: priced without moving anything
      m.value = score(loads_.time_exchanging(c, m.head, m.back), loads_.time_exchanging(m.d, m.back, m.head));
      if (m.value < best.value) best = m;
      return;
    }
    // A group move's heads are exactly the group's heads on c before, and on d after (d held none of
    // them only if count(d, g) was 0; otherwise undo would take d's own heads too), so undo by head list.
    if (m.group >= 0 && loads_.count(m.d, m.group) > 0) {
      moved_.clear();
      for (int h = m.group * costs_.group_size; h < (m.group + 1) * costs_.group_size; ++h) {
        if (device_[static_cast<std::size_t>(h)] == c) moved_.push_back(h);
      }
      for (int h : moved_) {
        loads_.remove(h, c);
        loads_.add(h, m.d);
      }
      m.value = score(loads_.time(c), loads_.time(m.d));
      for (int h : moved_) {
        loads_.remove(h, m.d);
        loads_.add(h, c);
      }
    } else {
      shift(m, c, m.d);
      m.value = score(loads_.time(c), loads_.time(m.d));
      shift(m, m.d, c);
    }
    if (m.value < best.value) best = m;
  }

  const LayerCosts& costs_;
  int devices_;
  HeadAssignment& device_;
  Loads loads_;
  std::vector<int> on_c_;
  std::vector<int> on_d_;
  std::vector<int> moved_;
};

}  // namespace

HeadSolution solve_lpt_ls(const LayerCosts& costs, int devices, std::uint64_t seed, const LptLsOptions& options) {
  const double bound = lower_bound(costs, devices);
  const double target = bound * (1 + options.target_gap + 1e-12);
  HeadAssignment best;
  double best_t = 0;
  for (HeadAssignment start : {group_lpt(costs, devices), solve_greedy(costs, devices, seed).device}) {
    Descent(costs, devices, start).run();
    const double t = layer_time(costs, start, devices);
    if (best.empty() || t < best_t) {
      best = std::move(start);
      best_t = t;
    }
  }
  // Iterated local search: kick a few heads elsewhere, descend again, keep what is no worse.
  Rng rng(mix64(seed) ^ 0x4c50u);
  HeadAssignment current = best;
  double current_t = best_t;
  for (int round = 0; round < options.kicks && best_t > target && devices > 1; ++round) {
    HeadAssignment trial = current;
    Descent descent(costs, devices, trial);
    descent.perturb(rng, 2 + round % 3);
    descent.run();
    const double t = descent.max_time();
    if (t <= current_t) {
      current = std::move(trial);
      current_t = t;
      if (t < best_t) {
        best = current;
        best_t = t;
      }
    }
  }
  if (best_t <= target) return {best, best_t <= bound * (1 + 1e-12)};
  const BranchAndBoundResult exact =
      branch_and_bound(costs, devices, best, bound * (1 + options.target_gap), options.node_limit);
  const bool at_bound = exact.time <= bound * (1 + 1e-12);
  return {exact.device, at_bound || (exact.complete && options.target_gap == 0)};
}

}  // namespace fulcrum::heads
