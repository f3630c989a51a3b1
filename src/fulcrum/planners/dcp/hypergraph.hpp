// A weighted hypergraph in compressed form (nets -> pins and vertices -> nets), the input of DCP's
// placement: vertices carry one weight per balance constraint (DCP: compute FLOPs and memory bytes),
// nets carry the bytes that cross the network once for every extra part their pins touch.
#pragma once

#include <span>
#include <vector>

namespace fulcrum::dcp {

class Hypergraph {
 public:
  Hypergraph() = default;
  /// `vertex_weights` holds `constraints` weights per vertex, vertex-major; `nets[e]` lists net e's
  /// pins (duplicates are removed). Throws fulcrum::Error on a pin outside [0, vertices) or a negative
  /// weight.
  Hypergraph(int constraints, std::vector<double> vertex_weights, std::vector<double> net_weights,
             const std::vector<std::vector<int>>& nets);

  int constraints() const { return constraints_; }
  int vertices() const { return static_cast<int>(vertex_offsets_.size()) - 1; }
  int nets() const { return static_cast<int>(net_weights_.size()); }
  double weight(int v, int c) const { return vertex_weights_[static_cast<std::size_t>(v) * constraints_ + c]; }
  double net_weight(int e) const { return net_weights_[e]; }
  std::span<const int> pins(int e) const {
    return {pins_.data() + net_offsets_[e], pins_.data() + net_offsets_[e + 1]};
  }
  std::span<const int> incident_nets(int v) const {
    return {incident_.data() + vertex_offsets_[v], incident_.data() + vertex_offsets_[v + 1]};
  }
  double total_weight(int c) const;
  double max_weight(int c) const;

  /// The hypergraph induced by `vertices` (new ids in the given order); nets keep only those pins and
  /// are dropped when fewer than two remain (they can never be cut).
  Hypergraph induced(std::span<const int> vertices) const;

 private:
  int constraints_ = 1;
  std::vector<double> vertex_weights_;
  std::vector<double> net_weights_;
  std::vector<int> net_offsets_{0}, pins_;
  std::vector<int> vertex_offsets_{0}, incident_;
};

/// The connectivity objective: Σ over nets of weight · (λ − 1), λ = number of parts the net's pins touch.
double connectivity_cost(const Hypergraph& h, std::span<const int> parts, int k);
/// Weight of each part per constraint, part-major: [p * constraints + c].
std::vector<double> part_weights(const Hypergraph& h, std::span<const int> parts, int k);

}  // namespace fulcrum::dcp
