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

// Heads leaving device c for device d and heads coming back from d: each side one head, every head of one KV
// group on that device (its "part"), or nothing.
struct Move {
  int head = -1;        // a head c -> d, or -1
  int group = -1;       // every head of this group on c -> d, or -1
  int back = -1;        // a head d -> c, or -1
  int back_group = -1;  // every head of this group on d -> c, or -1
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

  // A kick: a few heads, or one device's part of a KV group, to other devices.
  void perturb(Rng& rng, int moves, bool part) {
    for (int k = 0; k < moves; ++k) {
      const int h = static_cast<int>(rng.uniform_int(0, costs_.heads() - 1));
      const int from = device_[static_cast<std::size_t>(h)];
      const int to = (from + 1 + static_cast<int>(rng.uniform_int(0, devices_ - 2))) % devices_;
      Move m;
      (part ? m.group : m.head) = part ? costs_.group_of(h) : h;
      m.d = to;
      collect(m, from);
      transfer(from, to);
      if (part) return;
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

  // Every move between c and d: out of c one head or c's part of a group (or nothing), back from d one
  // head or d's part of a group (or nothing), scored by `score(time c, time d)` after the move; keeps the
  // lowest below best.value. Moving parts saves K/V projections where a group gets whole again.
  template <class Score>
  void search_pair(Move& best, int c, int d, Score score) {
    items(c, on_c_);
    items(d, on_d_);
    const Item none{-1, -1, 0, 0.0};
    for (const Item& out : on_c_) {
      try_move(best, c, d, out, none, score);
      for (const Item& in : on_d_) {
        if (out.head < 0 && in.head < 0 && out.group == in.group) continue;  // a group's parts trading places
        try_move(best, c, d, out, in, score);
      }
    }
  }

  // What can leave a device: each head, and each group part of two heads or more.
  struct Item {
    int head;  // >= 0: this head alone; -1: every head of `group` on the device
    int group;
    int n;        // heads moved
    double attn;  // their Σ t_attn
  };
  void items(int dev, std::vector<Item>& out) {
    out.clear();
    for (int g = 0; g < costs_.groups(); ++g) {
      const int n = loads_.count(dev, g);
      if (n == 0) continue;
      double sum = 0;
      for (int h = g * costs_.group_size; h < (g + 1) * costs_.group_size; ++h) {
        if (device_[static_cast<std::size_t>(h)] != dev) continue;
        sum += costs_.attention_s[static_cast<std::size_t>(h)];
        out.push_back({h, g, 1, costs_.attention_s[static_cast<std::size_t>(h)]});
      }
      if (n >= 2) out.push_back({-1, g, n, sum});
    }
  }
  // dev's time once `out` (on dev) left and `in` (not on dev) arrived, priced without moving them.
  double time_after(int dev, const Item& out, const Item& in) const {
    double compute = loads_.compute(dev) - out.attn - out.n * costs_.qo_s + in.attn + in.n * costs_.qo_s;
    int groups = loads_.groups_on(dev);
    const bool out_whole = out.n > 0 && loads_.count(dev, out.group) == out.n;  // its last heads leave
    if (out_whole) {
      compute -= costs_.kv_s();
      --groups;
    }
    if (in.n > 0 && loads_.count(dev, in.group) - (in.group == out.group ? out.n : 0) == 0) {
      compute += costs_.kv_s();
      ++groups;
    }
    return std::max(compute, groups * costs_.offload_per_group_s);
  }
  template <class Score>
  void try_move(Move& best, int c, int d, const Item& out, const Item& in, Score score) {
    const double value = score(time_after(c, out, in), time_after(d, in, out));
    if (value < best.value) {
      best = Move{
          out.head, out.head < 0 ? out.group : -1, in.n > 0 ? in.head : -1, in.n > 0 && in.head < 0 ? in.group : -1, d,
          value};
    }
  }

  // The heads a move takes out of c (out_) and back from d (in_), as the assignment stands.
  void collect(const Move& m, int c) {
    out_.clear();
    in_.clear();
    auto part = [&](std::vector<int>& list, int g, int on) {
      for (int h = g * costs_.group_size; h < (g + 1) * costs_.group_size; ++h) {
        if (device_[static_cast<std::size_t>(h)] == on) list.push_back(h);
      }
    };
    if (m.head >= 0) out_.push_back(m.head);
    if (m.group >= 0) part(out_, m.group, c);
    if (m.back >= 0) in_.push_back(m.back);
    if (m.back_group >= 0) part(in_, m.back_group, m.d);
  }
  // Moves out_ from c to d and in_ from d to c; transfer(d, c) then undoes it.
  void transfer(int c, int d) {
    for (int h : out_) {
      loads_.remove(h, c);
      loads_.add(h, d);
      device_[static_cast<std::size_t>(h)] = d;
    }
    for (int h : in_) {
      loads_.remove(h, d);
      loads_.add(h, c);
      device_[static_cast<std::size_t>(h)] = c;
    }
  }
  void apply(int c, const Move& m) {
    collect(m, c);
    transfer(c, m.d);
  }
  const LayerCosts& costs_;
  int devices_;
  HeadAssignment& device_;
  Loads loads_;
  std::vector<Item> on_c_;
  std::vector<Item> on_d_;
  std::vector<int> out_;
  std::vector<int> in_;
};

}  // namespace

HeadSolution solve_lpt_ls(const LayerCosts& costs, int devices, std::uint64_t seed, const LptLsOptions& options) {
  const double bound = lower_bound_quick(costs, devices);
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
  // Nothing is faster than what the pieces relaxation refutes just below it (one DP, no bisection).
  auto refuted_below = [&](double t) { return !pieces_allow(costs, devices, t * (1 - 1e-11)); };
  if (best_t > target && refuted_below(best_t)) return {best, true};
  // Iterated local search: kick a few heads, or a group's part, elsewhere, descend again, keep what is no worse.
  const double start_t = best_t;
  Rng rng(mix64(seed) ^ 0x4c50u);
  HeadAssignment current = best;
  double current_t = best_t;
  for (int round = 0; round < options.kicks && best_t > target && devices > 1; ++round) {
    HeadAssignment trial = current;
    Descent descent(costs, devices, trial);
    descent.perturb(rng, 2 + round % 3, round % 2 == 1);
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
  if (best_t < start_t && refuted_below(best_t)) return {best, true};
  const BranchAndBoundResult exact =
      branch_and_bound(costs, devices, best, bound * (1 + options.target_gap), options.node_limit);
  const bool at_bound = exact.time <= bound * (1 + 1e-12);
  return {exact.device, at_bound || (exact.complete && options.target_gap == 0)};
}

}  // namespace fulcrum::heads
