#include "fulcrum/planners/heads/solver.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/core/random.hpp"
#include "fulcrum/planners/heads/scenarios.hpp"
#include "fulcrum/planners/heads/solvers.hpp"

#include <gtest/gtest.h>

#include <limits>

namespace fulcrum::heads {
namespace {

double exhaustive_optimum(const LayerCosts& c, int devices) {
  HeadAssignment a(static_cast<std::size_t>(c.heads()), 0);
  double best = std::numeric_limits<double>::infinity();
  while (true) {
    best = std::min(best, layer_time(c, a, devices));
    std::size_t i = 0;
    while (i < a.size() && ++a[i] == devices) a[i++] = 0;
    if (i == a.size()) return best;
  }
}

// Tiny layers of the kinds the scenarios mix: a few heavy heads, many light ones, equal heads (ties), GQA
// groups of 1-4 heads, projections from negligible to dominant, sometimes an offload term.
LayerCosts random_tiny_layer(Rng& rng, int trial) {
  LayerCosts c;
  const int group_sizes[] = {1, 2, 4, 1, 2};
  c.group_size = group_sizes[trial % 5];
  const int max_groups = 10 / c.group_size;
  const int heads = c.group_size * static_cast<int>(rng.uniform_int(1, max_groups));
  for (int h = 0; h < heads; ++h) {
    const double u = rng.uniform();
    c.attention_s.push_back(trial % 4 == 0 ? (u < 0.3 ? 10.0 : 1.0)
                                           : (u < 0.2 ? 5 + 5 * rng.uniform() : rng.uniform()));
  }
  c.qo_s = rng.uniform() * (trial % 3 == 0 ? 2.0 : 0.2);
  c.qkvo_s = c.qo_s * (1 + rng.uniform() * 2);
  c.offload_per_group_s = trial % 7 == 3 ? 2 * rng.uniform() : 0;
  return c;
}

void expect_valid(const HeadSolution& s, const LayerCosts& c, int devices, std::string_view solver) {
  ASSERT_EQ(static_cast<int>(s.device.size()), c.heads()) << solver;
  for (int d : s.device) ASSERT_TRUE(d >= 0 && d < devices) << solver;
}

TEST(HeadSolvers, EverySolverIsValidAndOursIsTheExhaustiveOptimumOnTinyLayers) {
  Rng rng(2024);
  int ours_proven = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const LayerCosts c = random_tiny_layer(rng, trial);
    const int devices = static_cast<int>(rng.uniform_int(1, std::min(3, c.heads())));
    const double optimum = exhaustive_optimum(c, devices);
    for (const auto& r : head_solver_registry()) {
      const HeadSolution s = solve_heads(r, c, devices, static_cast<std::uint64_t>(trial));
      expect_valid(s, c, devices, r.name);
      const double t = layer_time(c, s.device, devices);
      EXPECT_GE(t, optimum * (1 - 1e-12)) << r.name << " trial " << trial;
      if (r.name == "lpt-ls") {
        EXPECT_NEAR(t, optimum, 1e-12 * optimum) << "trial " << trial;
        ours_proven += s.proven_optimal;
      }
    }
  }
  EXPECT_EQ(ours_proven, 60);  // tiny layers are always searched to the end
}

TEST(HeadSolvers, SameSeedSameAssignment) {
  for (const auto& name : scenario_names()) {
    const Scenario s = scenario(name, 3);
    const LayerCosts c = HeadCostModel{}.layer(s.heads, s.kv_heads, 32768);
    for (const auto& r : head_solver_registry()) {
      EXPECT_EQ(solve_heads(r, c, s.devices, 9).device, solve_heads(r, c, s.devices, 9).device) << r.name;
    }
  }
}

// Every solver stays above the lower bound; ours beats every other solver, is within 1% of the bound or
// proven optimal on all ten scenarios for seed 1 (the acceptance point), and within 3% on seeds 2 and 3
// (docs/experiments.md lists those above 1%).
TEST(HeadSolvers, OursBeatsTheOthersNearTheBoundOnEveryScenario) {
  int within_one_percent = 0;
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    for (const auto& name : scenario_names()) {
      const Scenario s = scenario(name, seed);
      const LayerCosts c = HeadCostModel{}.layer(s.heads, s.kv_heads, 131072);
      const double bound = lower_bound(c, s.devices);
      const HeadSolution ours = solve_heads("lpt-ls", c, s.devices, seed);
      const double t_ours = layer_time(c, ours.device, s.devices);
      for (const auto& r : head_solver_registry()) {
        const HeadSolution sol = solve_heads(r, c, s.devices, seed);
        expect_valid(sol, c, s.devices, r.name);
        const double t = layer_time(c, sol.device, s.devices);
        EXPECT_GE(t, bound * (1 - 1e-12)) << name << " " << r.name;
        EXPECT_LE(t_ours, t * (1 + 1e-12)) << name << " seed " << seed << ": lpt-ls worse than " << r.name;
      }
      const bool within = ours.proven_optimal || t_ours <= 1.01 * bound;
      EXPECT_TRUE(within || seed != 1) << name << ": " << t_ours / bound - 1 << " above the bound, not proven";
      EXPECT_LE(t_ours, 1.03 * bound) << name << " seed " << seed;
      within_one_percent += within;
    }
  }
  EXPECT_GE(within_one_percent, 28);  // of 30: seed 3's S7 and S10 are 1.1-1.2% above, unproven
}

TEST(HeadSolvers, BaselinesLayOutAsPublished) {
  LayerCosts c;
  c.attention_s.assign(12, 1.0);
  c.group_size = 2;
  EXPECT_EQ(solve_heads("uniform", c, 4, 0).device, (HeadAssignment{0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3}));
  const HeadAssignment ru = solve_heads("random-uniform", c, 4, 5).device;
  for (int d = 0; d < 4; ++d) EXPECT_EQ(std::count(ru.begin(), ru.end(), d), 3);
  EXPECT_NE(ru, solve_heads("uniform", c, 4, 0).device);
  // Greedy puts the heavy head alone and fills the other device.
  c.attention_s = {1, 1, 1, 3};
  c.group_size = 1;
  EXPECT_EQ(solve_heads("greedy", c, 2, 0).device, (HeadAssignment{1, 1, 1, 0}));
}

TEST(HeadSolvers, BadInputNamesTheField) {
  LayerCosts c;
  c.attention_s.assign(4, 1.0);
  auto message = [](auto&& call) {
    try {
      call();
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kBadInput);
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(message([&] { solve_heads("greedy", c, 5, 0); }).find("devices = 5: must be in [1, 4]"), std::string::npos);
  EXPECT_NE(message([&] { solve_heads("greedy", c, 0, 0); }).find("devices = 0"), std::string::npos);
  EXPECT_NE(
      message([&] { solve_heads("hungarian", c, 2, 0); }).find("solver = 'hungarian': unknown; choose from uniform"),
      std::string::npos);
  c.attention_s[2] = -1;
  EXPECT_NE(message([&] { solve_heads("greedy", c, 2, 0); }).find("attention time of head 2 = -1"), std::string::npos);
}

}  // namespace
}  // namespace fulcrum::heads
