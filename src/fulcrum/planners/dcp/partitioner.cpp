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

namespace fulcrum::dcp {

void PartitionConfig::validate() const {
  if (parts < 1) fail("partition parts = {}: must be >= 1", parts);
  if (!(epsilon >= 0 && epsilon <= 10)) fail("epsilon = {}: must be in [0, 10]", epsilon);
  if (initial_tries < 1) fail("initial tries = {}: must be >= 1", initial_tries);
}

std::vector<double> balance_limits(const Hypergraph& h, const PartitionConfig& config) {
  std::vector<double> limits;
  for (int c = 0; c < h.constraints(); ++c) {
    const double mean = h.total_weight(c) / config.parts;
    double limit = (1 + config.epsilon) * mean;
    if (config.allow_heaviest_vertex) limit = std::max(limit, mean + h.max_weight(c));
    limits.push_back(limit);
  }
  return limits;
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

// Greedy growing: parts filled one after another in BFS order up to the mean of every constraint.
std::vector<int> grow_parts(const Hypergraph& h, int k, Rng& rng) {
  const int constraints = h.constraints();
  std::vector<double> mean(static_cast<std::size_t>(constraints));
  for (int c = 0; c < constraints; ++c) mean[c] = h.total_weight(c) / k;
  std::vector<double> load(static_cast<std::size_t>(constraints), 0.0);
  std::vector<int> parts(static_cast<std::size_t>(h.vertices()), 0);
  int p = 0;
  for (int v : bfs_order(h, rng)) {
    bool full = false;
    for (int c = 0; c < constraints; ++c) full = full || (h.weight(v, c) > 0 && load[c] + h.weight(v, c) / 2 > mean[c]);
    if (full && p + 1 < k) {
      ++p;
      std::fill(load.begin(), load.end(), 0.0);
    }
    parts[v] = p;
    for (int c = 0; c < constraints; ++c) load[c] += h.weight(v, c);
  }
  return parts;
}

// Greedy affinity: vertices in BFS order, each to the part that already holds most of its nets' weight
// among those below the mean load (then below the limit, then the least loaded); a vertex with no
// placed neighbour starts in the least loaded part, so a component is not split at a part's end.
std::vector<int> affinity_parts(const Hypergraph& h, int k, const std::vector<double>& limits, Rng& rng) {
  const int constraints = h.constraints();
  std::vector<double> mean(static_cast<std::size_t>(constraints));
  for (int c = 0; c < constraints; ++c) mean[c] = h.total_weight(c) / k;
  std::vector<double> load(static_cast<std::size_t>(k) * constraints, 0.0);
  std::vector<int> present(static_cast<std::size_t>(h.nets()) * k, 0);
  std::vector<int> parts(static_cast<std::size_t>(h.vertices()), 0);
  std::vector<double> affinity(static_cast<std::size_t>(k));
  auto fill = [&](int p) {  // the fullest constraint of p, relative to the mean
    double most = 0;
    for (int c = 0; c < constraints; ++c) most = std::max(most, load[static_cast<std::size_t>(p) * constraints + c] / std::max(mean[c], 1e-300));
    return most;
  };
  auto below = [&](int v, int p, const std::vector<double>& cap) {
    for (int c = 0; c < constraints; ++c) {
      const double w = h.weight(v, c);
      if (w > 0 && load[static_cast<std::size_t>(p) * constraints + c] + w > cap[c]) return false;
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
    for (const std::vector<double>* cap : {static_cast<const std::vector<double>*>(&mean), &limits}) {
      for (int p = 0; p < k; ++p) {
        if (!below(v, p, *cap)) continue;
        if (best < 0 || affinity[p] > affinity[best] || (affinity[p] == affinity[best] && fill(p) < fill(best))) best = p;
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

}  // namespace

// How coarse the coarsest level gets, and how heavy a cluster may grow (share of a part's mean).
constexpr int kCoarsestPerPart = 30;
constexpr double kMaxClusterShare = 0.05;

std::vector<int> partition(const Hypergraph& h, const PartitionConfig& config) {
  config.validate();
  const int k = config.parts;
  if (k == 1 || h.vertices() == 0) return std::vector<int>(static_cast<std::size_t>(h.vertices()), 0);
  const auto limits = balance_limits(h, config);
  // Coarsen to ~kCoarsestPerPart vertices per part; clusters stay below kMaxClusterShare of a part so
  // the coarse levels can still be balanced.
  const int target = kCoarsestPerPart * k;
  std::vector<double> max_cluster(static_cast<std::size_t>(h.constraints()));
  for (int c = 0; c < h.constraints(); ++c) max_cluster[c] = kMaxClusterShare * h.total_weight(c) / k;
  const auto levels = coarsen(h, target, max_cluster, config.seed);
  const Hypergraph& coarsest = levels.empty() ? h : levels.back().graph;

  // Initial partition: several seeded greedy growings, each refined; the best balanced one wins.
  std::vector<int> parts;
  {
    Rng rng(mix64(config.seed ^ 0x1417u));
    std::unique_ptr<PartitionState> best;
    for (int t = 0; t < config.initial_tries; ++t) {
      auto initial = t % 2 ? grow_parts(coarsest, k, rng) : affinity_parts(coarsest, k, limits, rng);
      auto state = std::make_unique<PartitionState>(coarsest, k, std::move(initial), limits);
      fm_refine(*state, rng.next_u64());
      if (!best || better(*state, *best)) best = std::move(state);
    }
    parts = best->parts();
  }
  // Uncoarsening: project to the finer level and refine there.
  for (std::size_t i = levels.size(); i-- > 0;) {
    const Hypergraph& finer = i == 0 ? h : levels[i - 1].graph;
    std::vector<int> projected(static_cast<std::size_t>(finer.vertices()));
    for (int v = 0; v < finer.vertices(); ++v) projected[v] = parts[levels[i].fine_to_coarse[v]];
    PartitionState state(finer, k, std::move(projected), limits);
    fm_refine(state, mix64(config.seed + i));
    parts = state.parts();
  }
  return parts;
}

std::vector<int> partition_hierarchical(const Hypergraph& h, const HierarchyConfig& config) {
  if (config.machines < 1) fail("machines = {}: must be >= 1", config.machines);
  if (config.devices_per_machine < 1) fail("devices-per-machine = {}: must be >= 1", config.devices_per_machine);
  PartitionConfig top{.parts = config.machines, .epsilon = config.epsilon_machines,
                      .allow_heaviest_vertex = config.allow_heaviest_vertex, .seed = config.seed};
  const auto machine = partition(h, top);
  std::vector<int> device(static_cast<std::size_t>(h.vertices()), 0);
  for (int m = 0; m < config.machines; ++m) {
    std::vector<int> members;
    for (int v = 0; v < h.vertices(); ++v) {
      if (machine[v] == m) members.push_back(v);
    }
    PartitionConfig inner{.parts = config.devices_per_machine, .epsilon = config.epsilon_devices,
                          .allow_heaviest_vertex = config.allow_heaviest_vertex, .seed = mix64(config.seed + 1 + m)};
    const auto local = partition(h.induced(members), inner);
    for (std::size_t i = 0; i < members.size(); ++i) device[members[i]] = m * config.devices_per_machine + local[i];
  }
  return device;
}

}  // namespace fulcrum::dcp
