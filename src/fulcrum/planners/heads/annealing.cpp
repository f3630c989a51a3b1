// Simulated annealing over head assignments (FlexAttn's SA baseline).
#include "fulcrum/core/random.hpp"
#include "fulcrum/planners/heads/loads.hpp"
#include "fulcrum/planners/heads/solvers.hpp"

#include <cmath>

namespace fulcrum::heads {
namespace {

struct Change {
  int head;
  int from;
  int to;
};

int draw(Rng& rng, int n) { return static_cast<int>(rng.uniform_int(0, n - 1)); }

}  // namespace

HeadSolution solve_sa(const LayerCosts& costs, int devices, std::uint64_t seed, const SaOptions& options) {
  HeadSolution best = solve_random_uniform(costs, devices, seed);
  if (devices == 1) return best;
  Rng rng(mix64(seed) ^ 0x5341u);
  HeadAssignment current = best.device;
  Loads loads(costs, devices, current);
  double current_t = loads.max_time();
  double best_t = current_t;
  const double t0 = options.initial_temperature * current_t;
  const double cooling =
      std::pow(options.final_temperature / options.initial_temperature, 1.0 / std::max(1, options.iterations));
  double temperature = t0;
  const int heads = costs.heads();
  const int groups = costs.groups();
  std::vector<Change> changes;
  for (int it = 0; it < options.iterations; ++it, temperature *= cooling) {
    changes.clear();
    const double r = rng.uniform();
    if (r < 0.5 || heads < 2) {
      const int h = draw(rng, heads);
      const int from = current[static_cast<std::size_t>(h)];
      const int to = (from + 1 + draw(rng, devices - 1)) % devices;
      changes.push_back({h, from, to});
    } else if (r < 0.85 || groups < 2) {
      const int a = draw(rng, heads);
      const int b = draw(rng, heads);
      const int da = current[static_cast<std::size_t>(a)];
      const int db = current[static_cast<std::size_t>(b)];
      if (da == db) continue;
      changes.push_back({a, da, db});
      changes.push_back({b, db, da});
    } else {
      const int g1 = draw(rng, groups);
      const int g2 = (g1 + 1 + draw(rng, groups - 1)) % groups;
      for (int j = 0; j < costs.group_size; ++j) {
        const int a = g1 * costs.group_size + j;
        const int b = g2 * costs.group_size + j;
        const int da = current[static_cast<std::size_t>(a)];
        const int db = current[static_cast<std::size_t>(b)];
        if (da == db) continue;
        changes.push_back({a, da, db});
        changes.push_back({b, db, da});
      }
      if (changes.empty()) continue;
    }
    for (const Change& c : changes) loads.remove(c.head, c.from);
    for (const Change& c : changes) loads.add(c.head, c.to);
    const double t = loads.max_time();
    const double delta = t - current_t;
    if (delta <= 0 || rng.uniform() < std::exp(-delta / temperature)) {
      for (const Change& c : changes) current[static_cast<std::size_t>(c.head)] = c.to;
      current_t = t;
      if (t < best_t) {
        best_t = t;
        best.device = current;
      }
    } else {
      for (const Change& c : changes) loads.remove(c.head, c.to);
      for (const Change& c : changes) loads.add(c.head, c.from);
    }
  }
  return best;
}

}  // namespace fulcrum::heads
