#include "fulcrum/planners/dcp/hypergraph.hpp"

#include "fulcrum/core/error.hpp"

#include <algorithm>

namespace fulcrum::dcp {

Hypergraph::Hypergraph(int constraints, std::vector<double> vertex_weights, std::vector<double> net_weights,
                       const std::vector<std::vector<int>>& nets)
    : constraints_(constraints), vertex_weights_(std::move(vertex_weights)), net_weights_(std::move(net_weights)) {
  if (constraints < 1) fail("hypergraph constraints = {}: must be >= 1", constraints);
  if (vertex_weights_.size() % static_cast<std::size_t>(constraints) != 0) {
    fail("hypergraph vertex weights = {}: must be a multiple of constraints = {}", vertex_weights_.size(), constraints);
  }
  if (net_weights_.size() != nets.size())
    fail("hypergraph net weights = {}: must be one per net ({})", net_weights_.size(), nets.size());
  const int n = static_cast<int>(vertex_weights_.size() / static_cast<std::size_t>(constraints));
  for (double w : vertex_weights_) {
    if (!(w >= 0)) fail("hypergraph vertex weight = {}: must be >= 0", w);
  }
  std::vector<int> degree(static_cast<std::size_t>(n) + 1, 0);
  for (std::size_t e = 0; e < nets.size(); ++e) {
    if (!(net_weights_[e] >= 0)) fail("hypergraph net {} weight = {}: must be >= 0", e, net_weights_[e]);
    std::vector<int> pins = nets[e];
    std::sort(pins.begin(), pins.end());
    pins.erase(std::unique(pins.begin(), pins.end()), pins.end());
    for (int v : pins) {
      if (v < 0 || v >= n) fail("hypergraph net {} pin = {}: must be in [0, {})", e, v, n);
      ++degree[v + 1];
    }
    pins_.insert(pins_.end(), pins.begin(), pins.end());
    net_offsets_.push_back(static_cast<int>(pins_.size()));
  }
  for (int v = 0; v < n; ++v) degree[v + 1] += degree[v];
  vertex_offsets_ = degree;
  incident_.resize(pins_.size());
  std::vector<int> fill(degree.begin(), degree.end() - 1);
  for (int e = 0; e < this->nets(); ++e) {
    for (int v : pins(e)) incident_[fill[v]++] = e;
  }
}

double Hypergraph::total_weight(int c) const {
  double sum = 0;
  for (int v = 0; v < vertices(); ++v) sum += weight(v, c);
  return sum;
}

double Hypergraph::max_weight(int c) const {
  double most = 0;
  for (int v = 0; v < vertices(); ++v) most = std::max(most, weight(v, c));
  return most;
}

Hypergraph Hypergraph::induced(std::span<const int> vertices) const {
  std::vector<int> new_id(static_cast<std::size_t>(this->vertices()), -1);
  std::vector<double> weights;
  for (std::size_t i = 0; i < vertices.size(); ++i) {
    new_id[vertices[i]] = static_cast<int>(i);
    for (int c = 0; c < constraints_; ++c) weights.push_back(weight(vertices[i], c));
  }
  std::vector<std::vector<int>> nets;
  std::vector<double> net_weights;
  std::vector<char> seen(static_cast<std::size_t>(this->nets()), 0);
  for (int v : vertices) {
    for (int e : incident_nets(v)) {
      if (seen[e]) continue;
      seen[e] = 1;
      std::vector<int> kept;
      for (int u : pins(e)) {
        if (new_id[u] >= 0) kept.push_back(new_id[u]);
      }
      if (kept.size() < 2) continue;
      nets.push_back(std::move(kept));
      net_weights.push_back(net_weight(e));
    }
  }
  return Hypergraph(constraints_, std::move(weights), std::move(net_weights), nets);
}

double connectivity_cost(const Hypergraph& h, std::span<const int> parts, int k) {
  double cost = 0;
  std::vector<char> touched(static_cast<std::size_t>(k));
  for (int e = 0; e < h.nets(); ++e) {
    std::fill(touched.begin(), touched.end(), 0);
    int lambda = 0;
    for (int v : h.pins(e)) {
      if (!touched[parts[v]]) {
        touched[parts[v]] = 1;
        ++lambda;
      }
    }
    if (lambda > 1) cost += h.net_weight(e) * (lambda - 1);
  }
  return cost;
}

std::vector<double> part_weights(const Hypergraph& h, std::span<const int> parts, int k) {
  std::vector<double> w(static_cast<std::size_t>(k) * h.constraints(), 0.0);
  for (int v = 0; v < h.vertices(); ++v) {
    for (int c = 0; c < h.constraints(); ++c)
      w[static_cast<std::size_t>(parts[v]) * h.constraints() + c] += h.weight(v, c);
  }
  return w;
}

}  // namespace fulcrum::dcp
