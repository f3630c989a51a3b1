// FlexAttn's published genetic algorithm, with its parameters as defaults (GaOptions).
#include "fulcrum/core/random.hpp"
#include "fulcrum/planners/heads/loads.hpp"
#include "fulcrum/planners/heads/solvers.hpp"

#include <algorithm>
#include <numeric>

namespace fulcrum::heads {
namespace {

struct Individual {
  HeadAssignment device;
  double time = 0;
};

// Roulette wheel over weights 1 / T_layer: shorter layers are proportionally likelier parents.
std::size_t roulette(Rng& rng, const std::vector<double>& cumulative) {
  const double x = rng.uniform() * cumulative.back();
  const auto it = std::upper_bound(cumulative.begin(), cumulative.end(), x);
  return std::min(static_cast<std::size_t>(it - cumulative.begin()), cumulative.size() - 1);
}

}  // namespace

HeadSolution solve_ga(const LayerCosts& costs, int devices, std::uint64_t seed, const GaOptions& options) {
  Rng rng(mix64(seed) ^ 0x4741u);
  const int heads = costs.heads();
  const auto pop_size = static_cast<std::size_t>(options.population);
  auto evaluate = [&](Individual& x) { x.time = Loads(costs, devices, x.device).max_time(); };
  std::vector<Individual> population(pop_size);
  for (Individual& x : population) {
    for (int h = 0; h < heads; ++h) x.device.push_back(static_cast<int>(rng.uniform_int(0, devices - 1)));
    evaluate(x);
  }
  auto by_time = [](const Individual& a, const Individual& b) { return a.time < b.time; };
  std::stable_sort(population.begin(), population.end(), by_time);
  double best = population.front().time;
  int stagnant = 0;
  std::vector<double> cumulative(pop_size);
  for (int gen = 0; gen < options.generations && stagnant < options.stagnation; ++gen) {
    double sum = 0;
    for (std::size_t i = 0; i < pop_size; ++i) {
      sum += population[i].time > 0 ? 1.0 / population[i].time : 1.0;
      cumulative[i] = sum;
    }
    std::vector<Individual> next = population;
    while (next.size() < 2 * pop_size) {
      Individual a = population[roulette(rng, cumulative)];
      Individual b = population[roulette(rng, cumulative)];
      if (heads >= 2 && rng.uniform() < options.crossover) {
        const auto cut = static_cast<std::size_t>(rng.uniform_int(1, heads - 1));
        std::swap_ranges(a.device.begin() + static_cast<std::ptrdiff_t>(cut), a.device.end(),
                         b.device.begin() + static_cast<std::ptrdiff_t>(cut));
      }
      for (Individual* child : {&a, &b}) {
        for (int& d : child->device) {
          if (devices > 1 && rng.uniform() < options.mutation) {
            d = (d + 1 + static_cast<int>(rng.uniform_int(0, devices - 2))) % devices;
          }
        }
        evaluate(*child);
        next.push_back(std::move(*child));
      }
    }
    std::stable_sort(next.begin(), next.end(), by_time);
    next.resize(pop_size);
    population = std::move(next);
    if (population.front().time < best) {
      best = population.front().time;
      stagnant = 0;
    } else {
      ++stagnant;
    }
  }
  return {population.front().device, false};
}

}  // namespace fulcrum::heads
