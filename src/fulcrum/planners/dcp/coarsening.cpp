#include "fulcrum/planners/dcp/coarsening.hpp"

#include "fulcrum/core/random.hpp"

#include <algorithm>

#include <numeric>

namespace fulcrum::dcp {

CoarseLevel coarsen_once(const Hypergraph& h, const std::vector<double>& max_cluster_weight, std::uint64_t seed) {
  const int n = h.vertices();
  const int constraints = h.constraints();
  std::vector<int> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  Rng rng(seed);
  rng.shuffle(order);
  std::vector<int> mate(static_cast<std::size_t>(n), -1);
  std::vector<double> rating(static_cast<std::size_t>(n), 0.0);
  std::vector<int> touched;
  auto may_merge = [&](int u, int v) {
    for (int c = 0; c < constraints; ++c) {
      const double a = h.weight(u, c), b = h.weight(v, c);
      if (a > 0 && b > 0 && a + b > max_cluster_weight[c]) return false;
    }
    return true;
  };
  for (int u : order) {
    if (mate[u] >= 0) continue;
    for (int e : h.incident_nets(u)) {
      const auto pins = h.pins(e);
      if (pins.size() < 2) continue;
      const double score = h.net_weight(e) / static_cast<double>(pins.size() - 1);
      for (int v : pins) {
        if (v == u || mate[v] >= 0) continue;
        if (rating[v] == 0.0) touched.push_back(v);
        rating[v] += score;
      }
    }
    int best = -1;
    for (int v : touched) {
      // Highest rating, ties to the lower id so the result depends only on the seed.
      if ((best < 0 || rating[v] > rating[best] || (rating[v] == rating[best] && v < best)) && may_merge(u, v)) best = v;
    }
    for (int v : touched) rating[v] = 0.0;
    touched.clear();
    mate[u] = best >= 0 ? best : u;
    if (best >= 0) mate[best] = u;
  }

  CoarseLevel level;
  level.fine_to_coarse.assign(static_cast<std::size_t>(n), -1);
  int coarse = 0;
  for (int v = 0; v < n; ++v) {
    if (level.fine_to_coarse[v] >= 0) continue;
    level.fine_to_coarse[v] = coarse;
    level.fine_to_coarse[mate[v]] = coarse;
    ++coarse;
  }
  std::vector<double> weights(static_cast<std::size_t>(coarse) * constraints, 0.0);
  for (int v = 0; v < n; ++v) {
    for (int c = 0; c < constraints; ++c) weights[static_cast<std::size_t>(level.fine_to_coarse[v]) * constraints + c] += h.weight(v, c);
  }
  std::vector<std::vector<int>> nets;
  std::vector<double> net_weights;
  for (int e = 0; e < h.nets(); ++e) {
    std::vector<int> pins;
    for (int v : h.pins(e)) pins.push_back(level.fine_to_coarse[v]);
    std::sort(pins.begin(), pins.end());
    pins.erase(std::unique(pins.begin(), pins.end()), pins.end());
    if (pins.size() < 2) continue;  // a net inside one cluster can never be cut again
    nets.push_back(std::move(pins));
    net_weights.push_back(h.net_weight(e));
  }
  level.graph = Hypergraph(constraints, std::move(weights), std::move(net_weights), nets);
  return level;
}

std::vector<CoarseLevel> coarsen(const Hypergraph& h, int target_vertices, const std::vector<double>& max_cluster_weight,
                                 std::uint64_t seed) {
  std::vector<CoarseLevel> levels;
  constexpr std::size_t kMaxLevels = 64;  // each level at least 5% smaller, so this is never reached
  levels.reserve(kMaxLevels);             // `current` points into it
  const Hypergraph* current = &h;
  while (current->vertices() > target_vertices && levels.size() < kMaxLevels) {
    CoarseLevel next = coarsen_once(*current, max_cluster_weight, mix64(seed + levels.size()));
    if (next.graph.vertices() > current->vertices() * 95 / 100) break;
    levels.push_back(std::move(next));
    current = &levels.back().graph;
  }
  return levels;
}

}  // namespace fulcrum::dcp
