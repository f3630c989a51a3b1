#include "fulcrum/planners/dcp/refinement.hpp"

#include "fulcrum/core/random.hpp"

#include <algorithm>
#include <numeric>
#include <queue>
#include <tuple>

namespace fulcrum::dcp {

PartitionState::PartitionState(const Hypergraph& h, int k, std::vector<int> parts, std::vector<double> limits)
    : h_(h),
      k_(k),
      parts_(std::move(parts)),
      limits_(std::move(limits)),
      load_(part_weights(h, parts_, k)),
      pin_count_(static_cast<std::size_t>(h.nets()) * k, 0),
      connected_(static_cast<std::size_t>(k), 0.0) {
  for (int e = 0; e < h.nets(); ++e) {
    int lambda = 0;
    for (int v : h.pins(e)) {
      if (pin_count_[static_cast<std::size_t>(e) * k + parts_[v]]++ == 0) ++lambda;
    }
    if (lambda > 1) cost_ += h.net_weight(e) * (lambda - 1);
  }
}

double PartitionState::overload() const {
  double over = 0;
  for (int p = 0; p < k_; ++p) {
    for (int c = 0; c < h_.constraints(); ++c) {
      if (load(p, c) > limit(p, c)) over += (load(p, c) - limit(p, c)) / std::max(limit(p, c), 1e-300);
    }
  }
  return over;
}

bool PartitionState::fits(int v, int to) const {
  for (int c = 0; c < h_.constraints(); ++c) {
    const double w = h_.weight(v, c);
    if (w > 0 && load(to, c) + w > limit(to, c)) return false;
  }
  return true;
}

double PartitionState::room(int p) const {
  double least = 1.0;
  for (int c = 0; c < h_.constraints(); ++c) least = std::min(least, 1.0 - load(p, c) / std::max(limit(p, c), 1e-300));
  return least;
}

PartitionState::Move PartitionState::best_move(int v) const {
  const int from = parts_[v];
  double leaves = 0, total = 0;  // weight of nets v alone holds in `from`; weight of all v's nets
  std::fill(connected_.begin(), connected_.end(), 0.0);
  for (int e : h_.incident_nets(v)) {
    const double w = h_.net_weight(e);
    total += w;
    if (pin_count(e, from) == 1) leaves += w;
    for (int p = 0; p < k_; ++p) {
      if (pin_count(e, p) > 0) connected_[p] += w;
    }
  }
  Move best;
  double best_room = 0;
  for (int p = 0; p < k_; ++p) {
    if (p == from || !fits(v, p)) continue;
    // Leaving removes `from` from the nets only v held there; arriving adds p to nets not yet in p.
    const double gain = leaves - (total - connected_[p]);
    const double r = room(p);
    if (best.to < 0 || gain > best.gain || (gain == best.gain && r > best_room)) {
      best = {gain, p};
      best_room = r;
    }
  }
  return best;
}

void PartitionState::move(int v, int to) {
  const int from = parts_[v];
  for (int e : h_.incident_nets(v)) {
    int& in_from = pin_count_[static_cast<std::size_t>(e) * k_ + from];
    int& in_to = pin_count_[static_cast<std::size_t>(e) * k_ + to];
    if (--in_from == 0) cost_ -= h_.net_weight(e);
    if (in_to++ == 0) cost_ += h_.net_weight(e);
  }
  for (int c = 0; c < h_.constraints(); ++c) {
    load_[static_cast<std::size_t>(from) * h_.constraints() + c] -= h_.weight(v, c);
    load_[static_cast<std::size_t>(to) * h_.constraints() + c] += h_.weight(v, c);
  }
  parts_[v] = to;
}

void rebalance(PartitionState& state) {
  const Hypergraph& h = state.graph();
  for (int round = 0; round < 4 && state.overload() > 0; ++round) {
    for (int p = 0; p < state.k(); ++p) {
      for (int c = 0; c < h.constraints(); ++c) {
        if (state.load(p, c) <= state.limit(p, c)) continue;
        std::vector<std::tuple<double, int>> candidates;  // (-gain per weight, vertex)
        for (int v = 0; v < h.vertices(); ++v) {
          if (state.part(v) != p || h.weight(v, c) <= 0) continue;
          const auto m = state.best_move(v);
          if (m.to >= 0) candidates.emplace_back(-m.gain / h.weight(v, c), v);
        }
        std::sort(candidates.begin(), candidates.end());
        for (const auto& [key, v] : candidates) {
          if (state.load(p, c) <= state.limit(p, c)) break;
          const auto m = state.best_move(v);  // loads changed since the candidates were rated
          if (m.to >= 0) state.move(v, m.to);
        }
      }
    }
  }
}

namespace {

// One FM pass; returns the objective's improvement (>= 0 after the rollback).
double fm_pass(PartitionState& state, Rng& rng) {
  const Hypergraph& h = state.graph();
  const int n = h.vertices();
  using Entry = std::tuple<double, int, int, int>;  // gain, tie-break, vertex, version
  std::priority_queue<Entry> heap;
  std::vector<int> version(static_cast<std::size_t>(n), 0);
  std::vector<char> locked(static_cast<std::size_t>(n), 0);
  auto push = [&](int v) {
    const auto m = state.best_move(v);
    if (m.to >= 0) heap.emplace(m.gain, static_cast<int>(rng.next_u64() >> 33), v, ++version[v]);
  };
  // Boundary vertices: those on a net that spans several parts.
  std::vector<int> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  rng.shuffle(order);
  for (int v : order) {
    bool boundary = false;
    for (int e : h.incident_nets(v))
      boundary = boundary || state.pin_count(e, state.part(v)) < static_cast<int>(h.pins(e).size());
    if (boundary) push(v);
  }
  std::vector<std::pair<int, int>> moves;  // (vertex, from)
  double running = 0, best = 0;
  std::size_t best_length = 0;
  const std::size_t stall_limit = static_cast<std::size_t>(std::clamp(n / 20, 50, 1000));
  while (!heap.empty() && moves.size() - best_length < stall_limit) {
    const auto [gain, tie, v, ver] = heap.top();
    heap.pop();
    if (locked[v] || ver != version[v]) continue;
    const auto m = state.best_move(v);
    if (m.to < 0) continue;
    if (m.gain != gain) {  // a move elsewhere changed what fits where; rate it again
      heap.emplace(m.gain, tie, v, ++version[v]);
      continue;
    }
    const int from = state.part(v);
    state.move(v, m.to);
    locked[v] = 1;
    moves.emplace_back(v, from);
    running += m.gain;
    if (running > best + 1e-9 * std::max(1.0, std::abs(best))) {
      best = running;
      best_length = moves.size();
    }
    // Only nets whose pin counts crossed 0/1/2 in either part change their pins' gains.
    for (int e : h.incident_nets(v)) {
      const int in_from = state.pin_count(e, from), in_to = state.pin_count(e, m.to);
      if (in_from > 1 && in_to > 2) continue;
      for (int u : h.pins(e)) {
        if (!locked[u]) push(u);
      }
    }
  }
  for (std::size_t i = moves.size(); i > best_length; --i) state.move(moves[i - 1].first, moves[i - 1].second);
  return best;
}

}  // namespace

void fm_refine(PartitionState& state, std::uint64_t seed, int max_passes) {
  Rng rng(seed);
  rebalance(state);
  for (int pass = 0; pass < max_passes; ++pass) {
    const double before = state.cost();
    if (fm_pass(state, rng) <= 1e-9 * std::max(1.0, before)) break;
  }
}

}  // namespace fulcrum::dcp
