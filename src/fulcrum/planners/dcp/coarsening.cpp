#include "fulcrum/planners/dcp/coarsening.hpp"

#include "fulcrum/core/random.hpp"

#include <algorithm>
#include <numeric>

namespace fulcrum::dcp {

namespace {

std::vector<int> parts_on_level(const CoarseLevel& level, const std::vector<int>& finer_parts) {
  std::vector<int> coarse(static_cast<std::size_t>(level.graph.vertices()), 0);
  for (std::size_t v = 0; v < finer_parts.size(); ++v) coarse[level.fine_to_coarse[v]] = finer_parts[v];
  return coarse;
}

// Clustering (KaHyPar's ml_style): a vertex still on its own joins the neighbouring cluster it shares
// the most rated net weight with, if the cluster stays under the weight cap; clusters grow past pairs
// within one level, so a row or column of tiles can contract at once. Vertices are visited in a seeded
// random order; returns each vertex's cluster leader.
std::vector<int> cluster_leaders(const Hypergraph& h, const std::vector<double>& max_cluster_weight, std::uint64_t seed,
                                 std::span<const int> parts) {
  const int n = h.vertices();
  const int constraints = h.constraints();
  std::vector<int> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  Rng rng(seed);
  rng.shuffle(order);
  std::vector<int> leader(static_cast<std::size_t>(n));
  std::iota(leader.begin(), leader.end(), 0);
  std::vector<int> size(static_cast<std::size_t>(n), 1);
  std::vector<double> cluster_weight(static_cast<std::size_t>(n) * constraints);
  for (int v = 0; v < n; ++v) {
    for (int c = 0; c < constraints; ++c)
      cluster_weight[static_cast<std::size_t>(v) * constraints + c] = h.weight(v, c);
  }
  std::vector<double> rating(static_cast<std::size_t>(n), 0.0);
  std::vector<int> touched;
  auto may_join = [&](int u, int cluster) {
    for (int c = 0; c < constraints; ++c) {
      const double a = h.weight(u, c), b = cluster_weight[static_cast<std::size_t>(cluster) * constraints + c];
      if (a > 0 && b > 0 && a + b > max_cluster_weight[c]) return false;
    }
    return true;
  };
  for (int u : order) {
    if (leader[u] != u || size[u] > 1) continue;  // already clustered, or others joined it
    for (int e : h.incident_nets(u)) {
      const auto pins = h.pins(e);
      const double score = h.net_weight(e) / static_cast<double>(pins.size() - 1);
      for (int v : pins) {
        const int cluster = leader[v];
        if (v == u || cluster == u || (!parts.empty() && parts[v] != parts[u])) continue;
        if (rating[cluster] == 0.0) touched.push_back(cluster);
        rating[cluster] += score;
      }
    }
    int best = -1;
    for (int cluster : touched) {
      if (!may_join(u, cluster)) continue;
      // Highest rating, then clusters still on their own, then the lower id (deterministic per seed).
      if (best < 0 || rating[cluster] > rating[best] ||
          (rating[cluster] == rating[best] &&
           (size[cluster] < size[best] || (size[cluster] == size[best] && cluster < best)))) {
        best = cluster;
      }
    }
    for (int cluster : touched) rating[cluster] = 0.0;
    touched.clear();
    if (best < 0) continue;
    leader[u] = best;
    ++size[best];
    for (int c = 0; c < constraints; ++c)
      cluster_weight[static_cast<std::size_t>(best) * constraints + c] += h.weight(u, c);
  }
  return leader;
}

// The coarser level: a vertex per cluster with the cluster's weights, each net over the clusters of its
// pins.
CoarseLevel contract(const Hypergraph& h, const std::vector<int>& leader) {
  const int n = h.vertices();
  const int constraints = h.constraints();
  CoarseLevel level;
  level.fine_to_coarse.assign(static_cast<std::size_t>(n), -1);
  std::vector<int> id(static_cast<std::size_t>(n), -1);
  int coarse = 0;
  for (int v = 0; v < n; ++v) {
    if (id[leader[v]] < 0) id[leader[v]] = coarse++;
    level.fine_to_coarse[v] = id[leader[v]];
  }
  std::vector<double> weights(static_cast<std::size_t>(coarse) * constraints, 0.0);
  for (int v = 0; v < n; ++v) {
    for (int c = 0; c < constraints; ++c)
      weights[static_cast<std::size_t>(level.fine_to_coarse[v]) * constraints + c] += h.weight(v, c);
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

}  // namespace

CoarseLevel coarsen_once(const Hypergraph& h, const std::vector<double>& max_cluster_weight, std::uint64_t seed,
                         std::span<const int> parts) {
  return contract(h, cluster_leaders(h, max_cluster_weight, seed, parts));
}

std::vector<CoarseLevel> coarsen(const Hypergraph& h, int target_vertices,
                                 const std::vector<double>& max_cluster_weight, std::uint64_t seed,
                                 std::span<const int> parts) {
  std::vector<CoarseLevel> levels;
  constexpr std::size_t kMaxLevels = 64;  // each level at least 5% smaller, so this is never reached
  levels.reserve(kMaxLevels);             // `current` points into it
  const Hypergraph* current = &h;
  std::vector<int> current_parts(parts.begin(), parts.end());
  while (current->vertices() > target_vertices && levels.size() < kMaxLevels) {
    CoarseLevel next = coarsen_once(*current, max_cluster_weight, mix64(seed + levels.size()), current_parts);
    if (next.graph.vertices() > current->vertices() * 95 / 100) break;
    if (!current_parts.empty()) current_parts = parts_on_level(next, current_parts);
    levels.push_back(std::move(next));
    current = &levels.back().graph;
  }
  return levels;
}

std::vector<int> project_to_coarsest(const std::vector<CoarseLevel>& levels, std::vector<int> parts) {
  for (const auto& level : levels) parts = parts_on_level(level, parts);
  return parts;
}

}  // namespace fulcrum::dcp
