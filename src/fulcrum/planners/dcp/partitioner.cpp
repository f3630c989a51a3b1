#include "fulcrum/planners/dcp/partitioner.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/core/random.hpp"
#include "fulcrum/planners/dcp/coarsening.hpp"
#include "fulcrum/planners/dcp/refinement.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <memory>
#include <numeric>
#include <queue>

namespace fulcrum::dcp {

void PartitionConfig::validate() const {
  if (parts < 1) fail("partition parts = {}: must be >= 1", parts);
  if (!(epsilon >= 0 && epsilon <= 10)) fail("epsilon = {}: must be in [0, 10]", epsilon);
  if (initial_tries < 1) fail("initial tries = {}: must be >= 1", initial_tries);
  if (vcycles < 0) fail("vcycles = {}: must be >= 0", vcycles);
}

namespace {

// What each part should hold (its share of every constraint's total) and the most it may hold, per
// part and constraint ([p * constraints + c]).
struct Balance {
  std::vector<double> target, limit;
};

Balance share_balance(const Hypergraph& h, const std::vector<double>& shares, double epsilon, bool allow_heaviest) {
  Balance b;
  for (double share : shares) {
    for (int c = 0; c < h.constraints(); ++c) {
      const double target = share * h.total_weight(c);
      b.target.push_back(target);
      b.limit.push_back(allow_heaviest ? std::max((1 + epsilon) * target, target + h.max_weight(c))
                                       : (1 + epsilon) * target);
    }
  }
  return b;
}

}  // namespace

std::vector<double> balance_limits(const Hypergraph& h, const PartitionConfig& config) {
  const auto b = share_balance(h, {1.0 / config.parts}, config.epsilon, config.allow_heaviest_vertex);
  return b.limit;
}

namespace {

// Vertices in breadth-first order over shared nets from a random start (restarting in every component),
// so consecutive vertices tend to share nets.
std::vector<int> bfs_order(const Hypergraph& h, Rng& rng) {
  const int n = h.vertices();
  std::vector<int> starts(static_cast<std::size_t>(n));
  std::iota(starts.begin(), starts.end(), 0);
  rng.shuffle(starts);
  std::vector<char> seen(static_cast<std::size_t>(n), 0), net_done(static_cast<std::size_t>(h.nets()), 0);
  std::vector<int> order;
  std::deque<int> queue;
  for (int s : starts) {
    if (seen[s]) continue;
    seen[s] = 1;
    queue.push_back(s);
    while (!queue.empty()) {
      const int v = queue.front();
      queue.pop_front();
      order.push_back(v);
      for (int e : h.incident_nets(v)) {
        if (net_done[e]) continue;
        net_done[e] = 1;
        for (int u : h.pins(e)) {
          if (!seen[u]) {
            seen[u] = 1;
            queue.push_back(u);
          }
        }
      }
    }
  }
  return order;
}

// Greedy hypergraph growing: parts grown one after another up to their targets, each from a random
// free vertex, always taking the free vertex most strongly connected to the part (Σ weight of the nets
// it shares with it), so heavy nets are kept whole first; the last part takes what is left.
std::vector<int> grow_parts(const Hypergraph& h, int k, const Balance& balance, Rng& rng) {
  const int constraints = h.constraints();
  const int n = h.vertices();
  std::vector<int> parts(static_cast<std::size_t>(n), k - 1);
  std::vector<char> free(static_cast<std::size_t>(n), 1);
  std::vector<int> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  rng.shuffle(order);
  std::size_t next_seed = 0;
  for (int p = 0; p + 1 < k; ++p) {
    std::vector<double> load(static_cast<std::size_t>(constraints), 0.0), connection(static_cast<std::size_t>(n), 0.0);
    std::vector<char> net_in(static_cast<std::size_t>(h.nets()), 0);
    std::priority_queue<std::pair<double, int>> queue;  // (connection, vertex), stale entries skipped
    auto full = [&](int v) {
      for (int c = 0; c < constraints; ++c) {
        const double target = balance.target[static_cast<std::size_t>(p) * constraints + c];
        if (h.weight(v, c) > 0 && load[c] + h.weight(v, c) / 2 > target) return true;
      }
      return false;
    };
    while (true) {
      int v = -1;
      while (!queue.empty() && v < 0) {
        const auto [gain, u] = queue.top();
        queue.pop();
        if (free[u] && gain == connection[u]) v = u;
      }
      while (v < 0 && next_seed < order.size()) {  // a new seed: the part's component is exhausted
        if (free[order[next_seed]]) v = order[next_seed];
        ++next_seed;
      }
      if (v < 0 || full(v)) break;
      free[v] = 0;
      parts[v] = p;
      for (int c = 0; c < constraints; ++c) load[c] += h.weight(v, c);
      for (int e : h.incident_nets(v)) {
        if (net_in[e]) continue;  // its pins were credited when it joined the part
        net_in[e] = 1;
        for (int u : h.pins(e)) {
          if (!free[u]) continue;
          connection[u] += h.net_weight(e);
          queue.emplace(connection[u], u);
        }
      }
    }
    if (next_seed > 0) next_seed = 0;  // later parts may seed anywhere still free
  }
  return parts;
}

// Greedy affinity: vertices in BFS order, each to the part that already holds most of its nets' weight
// among those below the mean load (then below the limit, then the least loaded); a vertex with no
// placed neighbour starts in the least loaded part, so a component is not split at a part's end.
std::vector<int> affinity_parts(const Hypergraph& h, int k, const Balance& balance, Rng& rng) {
  const int constraints = h.constraints();
  std::vector<double> load(static_cast<std::size_t>(k) * constraints, 0.0);
  std::vector<int> present(static_cast<std::size_t>(h.nets()) * k, 0);
  std::vector<int> parts(static_cast<std::size_t>(h.vertices()), 0);
  std::vector<double> affinity(static_cast<std::size_t>(k));
  auto fill = [&](int p) {  // the fullest constraint of p, relative to its target
    double most = 0;
    for (int c = 0; c < constraints; ++c) {
      const auto i = static_cast<std::size_t>(p) * constraints + c;
      most = std::max(most, load[i] / std::max(balance.target[i], 1e-300));
    }
    return most;
  };
  auto below = [&](int v, int p, const std::vector<double>& cap) {
    for (int c = 0; c < constraints; ++c) {
      const double w = h.weight(v, c);
      const auto i = static_cast<std::size_t>(p) * constraints + c;
      if (w > 0 && load[i] + w > cap[i]) return false;
    }
    return true;
  };
  for (int v : bfs_order(h, rng)) {
    std::fill(affinity.begin(), affinity.end(), 0.0);
    for (int e : h.incident_nets(v)) {
      for (int p = 0; p < k; ++p) {
        if (present[static_cast<std::size_t>(e) * k + p] > 0) affinity[p] += h.net_weight(e);
      }
    }
    int best = -1;
    for (const std::vector<double>* cap : {&balance.target, &balance.limit}) {
      for (int p = 0; p < k; ++p) {
        if (!below(v, p, *cap)) continue;
        if (best < 0 || affinity[p] > affinity[best] || (affinity[p] == affinity[best] && fill(p) < fill(best)))
          best = p;
      }
      if (best >= 0) break;
    }
    if (best < 0) {
      best = 0;
      for (int p = 1; p < k; ++p) best = fill(p) < fill(best) ? p : best;
    }
    parts[v] = best;
    for (int c = 0; c < constraints; ++c) load[static_cast<std::size_t>(best) * constraints + c] += h.weight(v, c);
    for (int e : h.incident_nets(v)) ++present[static_cast<std::size_t>(e) * k + best];
  }
  return parts;
}

bool better(const PartitionState& x, const PartitionState& y) {
  const double ox = x.overload(), oy = y.overload();
  if (ox != oy) return ox < oy;
  return x.cost() < y.cost();
}

// How coarse the coarsest level gets, and how heavy a cluster may grow (share of a part's target).
constexpr int kCoarsestPerPart = 30;
constexpr double kMaxClusterShare = 0.05;
// V-cycles' clusters may weigh this many times more (half the smallest part's target).
constexpr double kVcycleClusterFactor = 10;
constexpr int kBisectionVcycles = 1;

std::vector<int> multilevel(const Hypergraph& h, int k, const Balance& balance, double bisection_epsilon,
                            const PartitionConfig& config);

// `parts` of the (already refined) coarsest of `levels` projected level by level down to `h` and
// refined k-way on each finer level.
std::vector<int> uncoarsen(const Hypergraph& h, const std::vector<CoarseLevel>& levels, std::vector<int> parts, int k,
                           const std::vector<double>& limits, std::uint64_t seed) {
  for (std::size_t i = levels.size(); i-- > 0;) {
    const Hypergraph& finer = i == 0 ? h : levels[i - 1].graph;
    std::vector<int> projected(static_cast<std::size_t>(finer.vertices()));
    for (int v = 0; v < finer.vertices(); ++v) projected[v] = parts[levels[i].fine_to_coarse[v]];
    PartitionState state(finer, k, std::move(projected), limits);
    fm_refine(state, mix64(seed + i));
    parts = state.parts();
  }
  return parts;
}

// Recursive bisection into parts of the given shares: each bisection is a multilevel 2-way partition
// with the looser per-level slack (1 + ε)^(1 / levels) − 1, then each side is split on its own.
std::vector<int> recursive_bisection(const Hypergraph& h, const std::vector<double>& shares, double epsilon,
                                     const PartitionConfig& config, std::uint64_t seed) {
  const int k = static_cast<int>(shares.size());
  std::vector<int> parts(static_cast<std::size_t>(h.vertices()), 0);
  if (k == 1 || h.vertices() == 0) return parts;
  const int k1 = k / 2;
  const std::vector<double> left(shares.begin(), shares.begin() + k1), right(shares.begin() + k1, shares.end());
  const double left_share = std::accumulate(left.begin(), left.end(), 0.0);
  const double right_share = std::accumulate(right.begin(), right.end(), 0.0);
  const double total = left_share + right_share;
  PartitionConfig two = config;
  two.parts = 2;
  two.seed = seed;
  // A bisection runs tries x (k − 1) times per partition: one V-cycle there buys most of what more
  // would (docs/experiments.md) at a fraction of the planner's time.
  two.vcycles = std::min(config.vcycles, kBisectionVcycles);
  const auto side = multilevel(
      h, 2, share_balance(h, {left_share / total, right_share / total}, epsilon, config.allow_heaviest_vertex), epsilon,
      two);
  for (int s = 0; s < 2; ++s) {
    std::vector<int> members;
    for (int v = 0; v < h.vertices(); ++v) {
      if (side[v] == s) members.push_back(v);
    }
    const auto& sub_shares = s == 0 ? left : right;
    const auto sub = recursive_bisection(h.induced(members), sub_shares, epsilon, config, mix64(seed + 1 + s));
    for (std::size_t i = 0; i < members.size(); ++i) parts[members[i]] = (s == 0 ? 0 : k1) + sub[i];
  }
  return parts;
}

std::vector<int> multilevel(const Hypergraph& h, int k, const Balance& balance, double bisection_epsilon,
                            const PartitionConfig& config) {
  // Coarsen to ~kCoarsestPerPart vertices per part; clusters stay below kMaxClusterShare of the smallest
  // part's target so the coarse levels can still be balanced.
  std::vector<double> max_cluster(static_cast<std::size_t>(h.constraints()), 0.0);
  for (int c = 0; c < h.constraints(); ++c) {
    double smallest = h.total_weight(c);
    for (int p = 0; p < k; ++p)
      smallest = std::min(smallest, balance.target[static_cast<std::size_t>(p) * h.constraints() + c]);
    max_cluster[c] = kMaxClusterShare * smallest;
  }
  const auto levels = coarsen(h, kCoarsestPerPart * k, max_cluster, config.seed);
  const Hypergraph& coarsest = levels.empty() ? h : levels.back().graph;

  // Initial partition: for more than two parts, seeded recursive bisections (the strongest start on
  // DCP's hypergraphs, docs/experiments.md), for two, greedy hypergraph growings and affinity
  // placements alternately; each refined k-way, the best balanced one wins.
  std::vector<int> parts;
  {
    Rng rng(mix64(config.seed ^ 0x1417u));
    std::unique_ptr<PartitionState> best;
    auto consider = [&](std::vector<int> initial) {
      auto state = std::make_unique<PartitionState>(coarsest, k, std::move(initial), balance.limit);
      fm_refine(*state, rng.next_u64());
      if (!best || better(*state, *best)) best = std::move(state);
    };
    std::vector<double> shares(static_cast<std::size_t>(k));
    for (int p = 0; p < k; ++p)
      shares[p] = balance.target[static_cast<std::size_t>(p) * h.constraints()] / std::max(h.total_weight(0), 1e-300);
    for (int t = 0; t < config.initial_tries; ++t) {
      if (k > 2) {
        consider(recursive_bisection(coarsest, shares, bisection_epsilon, config, rng.next_u64()));
      } else {
        consider(t % 2 ? grow_parts(coarsest, k, balance, rng) : affinity_parts(coarsest, k, balance, rng));
      }
    }
    parts = best->parts();
  }
  parts = uncoarsen(h, levels, std::move(parts), k, balance.limit, config.seed);
  // Clusters of V-cycles may be heavier than in the first pass: the balance is already met, and moving
  // a whole row of tiles (a cluster) at once is what single-vertex FM cannot do across a local minimum.
  std::vector<double> vcycle_cluster(max_cluster.size());
  for (std::size_t c = 0; c < max_cluster.size(); ++c) vcycle_cluster[c] = max_cluster[c] * kVcycleClusterFactor;
  // A fixed number of cycles: stopping at the first one that does not improve lost most of their gain
  // (later cycles, with other seeds, still find better partitions).
  for (int cycle = 0; cycle < config.vcycles; ++cycle) {
    const std::uint64_t seed = mix64(config.seed ^ (0x5c1e0000u + static_cast<std::uint64_t>(cycle)));
    const auto within = coarsen(h, k, vcycle_cluster, seed, parts);
    if (within.empty()) break;
    PartitionState coarsest_state(within.back().graph, k, project_to_coarsest(within, parts), balance.limit);
    fm_refine(coarsest_state, seed);
    auto candidate = uncoarsen(h, within, coarsest_state.parts(), k, balance.limit, seed);
    const PartitionState before(h, k, parts, balance.limit), after(h, k, candidate, balance.limit);
    if (better(after, before)) parts = std::move(candidate);
  }
  return parts;
}

}  // namespace

std::vector<int> partition(const Hypergraph& h, const PartitionConfig& config) {
  config.validate();
  const int k = config.parts;
  if (k == 1 || h.vertices() == 0) return std::vector<int>(static_cast<std::size_t>(h.vertices()), 0);
  const std::vector<double> shares(static_cast<std::size_t>(k), 1.0 / k);
  // KaHyPar's adaptive slack: ceil(log2 k) bisections, each with (1 + ε)^(1 / levels) − 1, compound to ε.
  const double levels = std::ceil(std::log2(static_cast<double>(k)));
  const double bisection_epsilon = std::pow(1 + config.epsilon, 1 / levels) - 1;
  return multilevel(h, k, share_balance(h, shares, config.epsilon, config.allow_heaviest_vertex), bisection_epsilon,
                    config);
}

std::vector<int> partition_hierarchical(const Hypergraph& h, const HierarchyConfig& config) {
  if (config.machines < 1) fail("machines = {}: must be >= 1", config.machines);
  if (config.devices_per_machine < 1) fail("devices-per-machine = {}: must be >= 1", config.devices_per_machine);
  PartitionConfig top{.parts = config.machines,
                      .epsilon = config.epsilon_machines,
                      .allow_heaviest_vertex = config.allow_heaviest_vertex,
                      .seed = config.seed};
  const auto machine = partition(h, top);
  std::vector<int> device(static_cast<std::size_t>(h.vertices()), 0);
  for (int m = 0; m < config.machines; ++m) {
    std::vector<int> members;
    for (int v = 0; v < h.vertices(); ++v) {
      if (machine[v] == m) members.push_back(v);
    }
    PartitionConfig inner{.parts = config.devices_per_machine,
                          .epsilon = config.epsilon_devices,
                          .allow_heaviest_vertex = config.allow_heaviest_vertex,
                          .seed = mix64(config.seed + 1 + m)};
    const auto local = partition(h.induced(members), inner);
    for (std::size_t i = 0; i < members.size(); ++i) device[members[i]] = m * config.devices_per_machine + local[i];
  }
  return device;
}

}  // namespace fulcrum::dcp
