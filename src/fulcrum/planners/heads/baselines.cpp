// The layouts that ignore head costs (Megatron's blocks, random) and the published greedy.
#include "fulcrum/core/random.hpp"
#include "fulcrum/planners/heads/loads.hpp"
#include "fulcrum/planners/heads/solvers.hpp"

#include <numeric>
#include <tuple>

namespace fulcrum::heads {
namespace {

int block_of(int position, int heads, int devices) {
  return static_cast<int>(static_cast<std::int64_t>(position) * devices / heads);
}

}  // namespace

HeadSolution solve_uniform(const LayerCosts& costs, int devices, std::uint64_t /*seed*/) {
  HeadSolution s;
  for (int h = 0; h < costs.heads(); ++h) s.device.push_back(block_of(h, costs.heads(), devices));
  return s;
}

HeadSolution solve_random(const LayerCosts& costs, int devices, std::uint64_t seed) {
  Rng rng(seed);
  HeadSolution s;
  for (int h = 0; h < costs.heads(); ++h) s.device.push_back(static_cast<int>(rng.uniform_int(0, devices - 1)));
  return s;
}

HeadSolution solve_random_uniform(const LayerCosts& costs, int devices, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<int> order(static_cast<std::size_t>(costs.heads()));
  std::iota(order.begin(), order.end(), 0);
  rng.shuffle(order);
  HeadSolution s;
  s.device.resize(order.size());
  for (int i = 0; i < costs.heads(); ++i) {
    s.device[static_cast<std::size_t>(order[static_cast<std::size_t>(i)])] = block_of(i, costs.heads(), devices);
  }
  return s;
}

HeadSolution solve_greedy(const LayerCosts& costs, int devices, std::uint64_t /*seed*/) {
  std::vector<int> order(static_cast<std::size_t>(costs.heads()));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return costs.attention_s[static_cast<std::size_t>(a)] > costs.attention_s[static_cast<std::size_t>(b)];
  });
  Loads loads(costs, devices);
  HeadSolution s;
  s.device.assign(order.size(), 0);
  for (int h : order) {
    const double current = loads.max_time();
    int best = 0;
    std::tuple<double, double> best_key{0, 0};
    for (int d = 0; d < devices; ++d) {
      const double t = loads.time_with(h, d);
      const std::tuple<double, double> key{std::max(current, t), t};
      if (d == 0 || key < best_key) {
        best = d;
        best_key = key;
      }
    }
    loads.add(h, best);
    s.device[static_cast<std::size_t>(h)] = best;
  }
  return s;
}

}  // namespace fulcrum::heads
