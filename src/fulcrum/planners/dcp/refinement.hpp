// Refinement, the last phase of the multilevel partitioner (run on every level while uncoarsening):
// k-way Fiduccia-Mattheyses on the connectivity objective Σ w(e)·(λ(e) − 1) under per-constraint part
// weight limits, after a rebalancing step that moves the cheapest vertices out of overloaded parts.
#pragma once

#include "fulcrum/planners/dcp/hypergraph.hpp"

#include <cstdint>
#include <vector>

namespace fulcrum::dcp {

/// A k-way partition with its pin counts Φ(e, p), part loads and objective kept up to date per move.
class PartitionState {
 public:
  /// `limits`: the most weight a part may hold, per part and constraint ([p * constraints + c]).
  PartitionState(const Hypergraph& h, int k, std::vector<int> parts, std::vector<double> limits);

  const Hypergraph& graph() const { return h_; }
  int k() const { return k_; }
  int part(int v) const { return parts_[v]; }
  const std::vector<int>& parts() const { return parts_; }
  double cost() const { return cost_; }
  /// Σ over parts and constraints of the weight above the limit, relative to the limit (0: balanced).
  double overload() const;
  double load(int p, int c) const { return load_[static_cast<std::size_t>(p) * h_.constraints() + c]; }
  double limit(int p, int c) const { return limits_[static_cast<std::size_t>(p) * h_.constraints() + c]; }
  /// Moving v to `to` keeps every constraint of `to` within its limit (or adds nothing to it).
  bool fits(int v, int to) const;

  struct Move {
    double gain = 0;  // decrease of the objective
    int to = -1;      // -1: no part v fits in
  };
  /// The best move of v to another part it fits in; ties go to the part with the most room.
  Move best_move(int v) const;
  void move(int v, int to);
  int pin_count(int e, int p) const { return pin_count_[static_cast<std::size_t>(e) * k_ + p]; }

 private:
  double room(int p) const;  // the smallest relative room over constraints

  const Hypergraph& h_;
  int k_;
  std::vector<int> parts_;
  std::vector<double> limits_;
  std::vector<double> load_;
  std::vector<int> pin_count_;
  double cost_ = 0;
  mutable std::vector<double> connected_;  // scratch of best_move: Σ w(e) over v's nets touching p
};

/// Moves vertices out of parts above a limit, cheapest objective increase first, into parts they fit.
void rebalance(PartitionState& state);

/// FM passes (negative-gain moves allowed, each vertex moved once per pass, rolled back to the best
/// prefix) until a pass no longer improves the objective or `max_passes` is reached.
void fm_refine(PartitionState& state, std::uint64_t seed, int max_passes = 8);

}  // namespace fulcrum::dcp
