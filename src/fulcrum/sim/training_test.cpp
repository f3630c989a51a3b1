#include "fulcrum/sim/training.hpp"

#include "fulcrum/sim/training_test_cases.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/cost/model_cost.hpp"
#include "fulcrum/planners/baselines/perdoc_cp.hpp"
#include "fulcrum/planners/planner.hpp"
#include "fulcrum/workload/length_source.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <numeric>

namespace fulcrum::sim {
namespace {

using testing::h200;
using testing::small_config;
using testing::tiny;

double sum(const TimeBreakdown& b) { return b.linear_s + b.attention_s + b.exposed_comm_s + b.idle_s + b.dp_sync_s; }

TEST(Training, BreakdownAddsUpToTheIteration) {
  for (const std::string planner : {"distca", "packed", "perdoc-cp", "wlb"}) {
    for (int pp : {1, 2}) {
      const auto r = simulate_training(small_config(planner, pp), tiny(), h200());
      EXPECT_NEAR(sum(r.breakdown), r.mean_iteration_s, 1e-9 * r.mean_iteration_s) << planner << " pp " << pp;
      EXPECT_GE(r.breakdown.idle_s, -1e-12) << planner << " pp " << pp;
      EXPECT_GT(r.tokens_per_s, 0);
      EXPECT_EQ(r.iteration_s.size(), 2u);
      if (planner != "wlb") {
        EXPECT_EQ(r.carried_tokens, 0);
        EXPECT_EQ(r.computed_work_share, 1);
        EXPECT_NEAR(r.tokens_per_s, r.tokens_per_iteration / r.mean_iteration_s, 1e-9 * r.tokens_per_s);
      }
      EXPECT_FALSE(r.trace.empty());
    }
  }
}

// With one TP group, one micro-batch and no pipeline the iteration is the layer's forward and backward
// times the layers (no gradient sync with a single replica): checked against simulate_pass directly.
TEST(Training, OneRankIsLayersTimesTheLayer) {
  TrainingConfig c = small_config("packed");
  c.parallel.gpus = 2;
  c.iterations = 1;
  c.warmup_iterations = 0;         // the first batch
  c.dataset = "uniform:100:4000";  // never longer than max_doc_len, so no document is cut
  const auto r = simulate_training(c, tiny(), h200());
  const ParallelConfig& p = c.parallel;
  const LayerSetup setup{tiny(), h200(), tp_group_hardware(h200(), p.tp), p.tp, c.mode};
  auto lengths = make_length_source(c.dataset, c.seed, c.max_doc_len);
  BatchStream stream([&] { return lengths->next(); }, 1, c.rank_tokens());
  Batch batch = stream.next();
  PlannerOptions options;
  options.model = tiny();
  const Assignment a = make_planner("packed", options)->plan(batch);
  const double layer =
      simulate_pass(a, setup, Pass::kForward).makespan_s() + simulate_pass(a, setup, Pass::kBackward).makespan_s();
  EXPECT_NEAR(r.mean_iteration_s, tiny().layers * layer, 1e-12);
  EXPECT_EQ(r.breakdown.dp_sync_s, 0);
  EXPECT_NEAR(r.tokens_per_iteration, 4096, 0);
}

// The whole-layer schedule (issue 20 item 5): DistCA's ping-pong layers overlap across their boundaries,
// so its iterations are no slower than one layer at a time, with and without pipeline stages, and less of
// its traffic is exposed; single-stream planners run one layer at a time either way, unchanged.
TEST(Training, WholeLayerScheduleOverlapsPingPongLayersOnly) {
  ModelShape model = tiny();
  model.layers = 8;  // tiny's 2 layers leave one per stage at pp 2: nothing to chain
  for (int pp : {1, 2}) {
    TrainingConfig whole = small_config("distca", pp);
    whole.parallel.gpus = 32;  // TP groups on 2 nodes: attention traffic crosses InfiniBand
    TrainingConfig per_layer = whole;
    per_layer.whole_layer = false;
    const auto w = simulate_training(whole, model, h200());
    const auto l = simulate_training(per_layer, model, h200());
    EXPECT_LT(w.mean_iteration_s, l.mean_iteration_s) << "pp " << pp;
    EXPECT_LT(w.breakdown.exposed_comm_s, l.breakdown.exposed_comm_s) << "pp " << pp;
    EXPECT_NEAR(sum(w.breakdown), w.mean_iteration_s, 1e-9 * w.mean_iteration_s);
    EXPECT_EQ(w.breakdown.linear_s, l.breakdown.linear_s);
    EXPECT_EQ(w.to_json()["layer_schedule"], "whole");
    EXPECT_EQ(l.to_json()["layer_schedule"], "per-layer");
  }
  TrainingConfig packed = small_config("packed");
  packed.mode = CommMode::kSingleStream;  // as a study runs the baselines
  TrainingConfig packed_per_layer = packed;
  packed_per_layer.whole_layer = false;
  EXPECT_EQ(simulate_training(packed, tiny(), h200()).iteration_s,
            simulate_training(packed_per_layer, tiny(), h200()).iteration_s);
}

TEST(Training, SameInputsGiveTheSameIterationAndTrace) {
  for (int pp : {1, 2}) {
    const auto a = simulate_training(small_config("distca", pp), tiny(), h200());
    const auto b = simulate_training(small_config("distca", pp), tiny(), h200());
    EXPECT_EQ(a.iteration_s, b.iteration_s);
    ASSERT_EQ(a.trace.size(), b.trace.size());
    for (std::size_t i = 0; i < a.trace.size(); ++i) {
      EXPECT_EQ(a.trace[i].start_s, b.trace[i].start_s);
      EXPECT_EQ(a.trace[i].end_s, b.trace[i].end_s);
    }
  }
}

TEST(Training, MoreBandwidthNeverSlowsAnIteration) {
  for (const std::string planner : {"distca", "perdoc-cp", "packed"}) {
    for (int pp : {1, 2}) {
      HardwareModel hw = h200();
      double previous = simulate_training(small_config(planner, pp), tiny(), hw).mean_iteration_s;
      for (int step = 0; step < 3; ++step) {
        hw.inter_node.bandwidth_bytes_per_s *= 2;
        hw.intra_node.bandwidth_bytes_per_s *= 2;
        const double t = simulate_training(small_config(planner, pp), tiny(), hw).mean_iteration_s;
        EXPECT_LE(t, previous * (1 + 1e-9)) << planner << " pp " << pp << " step " << step;
        previous = t;
      }
    }
  }
}

// Lognormal lengths with a long tail, llama3-8b on 4 nodes of h200-dgx (tp 8, so 4 attention ranks):
// packed leaves attention imbalanced, DistCA evens it out and trains faster; with PP its idle stages
// serve attention (the trace shows them).
TEST(Training, DistcaBalancesWherePackedStraggles) {
  const ModelShape llama = model_shape_preset("llama3-8b");
  auto config = [](const std::string& planner, int pp) {
    TrainingConfig c = small_config(planner, pp);
    c.parallel.gpus = 32;
    c.parallel.tp = 8;
    c.max_doc_len = 131072;
    c.tokens_per_rank = 65536;
    c.dataset = "lognormal:9.5:1.5";
    return c;
  };
  for (int pp : {1, 2}) {
    const auto distca = simulate_training(config("distca", pp), llama, h200());
    const auto packed = simulate_training(config("packed", pp), llama, h200());
    EXPECT_LT(distca.attention_imbalance, packed.attention_imbalance) << "pp " << pp;
    EXPECT_GT(distca.tokens_per_s, packed.tokens_per_s) << "pp " << pp;
    EXPECT_EQ(distca.tokens_per_iteration, packed.tokens_per_iteration);
    if (pp == 2) {
      bool serving = false;
      for (const auto& e : distca.trace) serving |= e.name == "attention server" && e.end_s > e.start_s;
      EXPECT_TRUE(serving);
    }
  }
}

// The formula itself: sim/memory_test.cpp. A run reports its peak, and whether it fits.
TEST(Training, MemoryIsReportedOutOfMemoryWhenItDoesNotFit) {
  HardwareModel small = h200();
  small.memory_bytes = 1e6;
  EXPECT_TRUE(simulate_training(small_config("distca"), tiny(), small).memory.out_of_memory());
  EXPECT_FALSE(simulate_training(small_config("distca"), tiny(), h200()).memory.out_of_memory());
  // Recomputation keeps less and costs compute: selective re-runs the attention's forward calls in backward,
  // full the whole layer's forward too. (Full's iteration may not be longer than selective's: ping-pong hides
  // more traffic behind the extra compute.) ZeRO-1 off keeps more optimizer state.
  for (const char* planner : {"packed", "distca"}) {
    TrainingConfig c = small_config(planner);
    c.iterations = 1;
    std::vector<TrainingResult> r;
    for (Recompute policy : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
      c.memory.recompute = policy;
      r.push_back(simulate_training(c, tiny(), h200()));
    }
    EXPECT_LT(r[1].memory.activations_bytes, r[0].memory.activations_bytes) << planner;
    EXPECT_LT(r[2].memory.activations_bytes, r[1].memory.activations_bytes) << planner;
    const auto compute_s = [](const TrainingResult& x) { return x.breakdown.linear_s + x.breakdown.attention_s; };
    EXPECT_LT(compute_s(r[0]), compute_s(r[1])) << planner;
    EXPECT_LT(compute_s(r[1]), compute_s(r[2])) << planner;
    EXPECT_LT(r[0].mean_iteration_s, r[1].mean_iteration_s) << planner;
    EXPECT_LT(r[0].mean_iteration_s, r[2].mean_iteration_s) << planner;
  }
  TrainingConfig c = small_config("packed");
  c.iterations = 1;
  c.memory.zero1 = false;
  const auto whole = simulate_training(c, tiny(), h200()).memory;
  c.memory.zero1 = true;
  EXPECT_GT(whole.optimizer_bytes, simulate_training(c, tiny(), h200()).memory.optimizer_bytes);
}

// A simulated rank is a TP group, so a node of 8 GPUs holds 8 / tp of them: DCP's machine level follows
// the topology, and cp-degree follows the layout for planners that plan in CP groups.
TEST(Training, PlannersGetTheTopologysMachineSize) {
  for (int tp : {1, 2, 8}) {
    TrainingConfig c = small_config("dcp");
    c.parallel = {.gpus = 16, .tp = tp, .pp = 1, .cp = 1, .microbatches = 0};
    c.iterations = 1;
    const ModelShape llama = model_shape_preset("llama3-8b");  // 8 kv heads: tp 8 divides them
    const PlannerOptions o = training_planner_options(c, llama, h200());
    EXPECT_EQ(o.devices_per_machine, 8 / tp) << "tp " << tp;
    EXPECT_EQ(o.values().count("cp-degree"), 0u) << "dcp plans over all ranks";
    EXPECT_GT(simulate_training(c, llama, h200()).tokens_per_s, 0) << "tp " << tp;
  }
  TrainingConfig wlb = small_config("wlb");
  wlb.parallel.cp = 4;
  EXPECT_EQ(training_planner_options(wlb, tiny(), h200()).get(find_planner_option("cp-degree")), 4);
}

TEST(Training, BadConfigurationsNameTheField) {
  auto expect_error = [](const TrainingConfig& c, const std::string& field) {
    try {
      simulate_training(c, tiny(), h200());
      ADD_FAILURE() << "no error for " << field;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  auto c = small_config("distca");
  c.parallel.tp = 3;
  expect_error(c, "tp = 3");
  c = small_config("distca");
  c.parallel.pp = 4;  // tiny has 2 layers
  expect_error(c, "pp = 4");
  c = small_config("distca");
  c.parallel.cp = 2;
  expect_error(c, "cp = 2");
  c = small_config("distca");
  c.iterations = 0;
  expect_error(c, "iterations");
  c = small_config("distca");
  c.max_doc_len = 0;
  expect_error(c, "max-doc-len");
  c = small_config("wlb");
  c.parallel.cp = 4;
  c.planner_options.set("cp-degree", 2);
  expect_error(c, "cp-degree = 2: disagrees with cp = 4");
  c = small_config("distca");
  c.planner = "nope";
  expect_error(c, "planner = 'nope'");
  c = small_config("distca");
  c.candidates = {"packed"};
  expect_error(c, "candidates: only planner auto");
  c.planner = "auto";
  c.candidates = {"distca", "striped"};
  expect_error(c, "candidates: striped does not compute exactly the batch");
}

// --cp-degree 0 is the default CP degree, as the help says (it was taken as cp 0: "must divide dp").
TEST(Training, CpDegreeZeroIsTheDefault) {
  TrainingConfig c = small_config("perdoc-cp");
  c.parallel.cp = 0;
  const int by_default = cp_degree_for(c, tiny(), h200());
  EXPECT_GT(by_default, 0);
  c.planner_options.set(cp_degree_option().name, 0);
  EXPECT_EQ(cp_degree_for(c, tiny(), h200()), by_default);
  c.parallel.cp = by_default;
  EXPECT_NO_THROW(c.validate(h200(), tiny()));
}

// auto on the same data as its candidates run alone: each iteration is exactly the fastest candidate's,
// the choice and runner-up are named, and every candidate's planning time is counted.
TEST(Training, AutoTakesTheFastestCandidateEachIteration) {
  const std::vector<std::string> names = {"distca", "packed", "perdoc-cp", "dcp"};
  TrainingConfig config = small_config("distca");
  config.planner = "auto";
  config.parallel.cp = 0;
  config.candidates = names;
  config.iterations = 4;
  const TrainingResult chosen = simulate_training(config, tiny(), h200());
  std::vector<TrainingResult> alone;
  for (const auto& name : names) {
    TrainingConfig c = small_config(name);
    c.iterations = config.iterations;
    c.mode = overlaps_traffic(name) ? config.mode : config.baseline_mode;
    c.parallel.cp = 0;
    c.parallel.cp = cp_degree_for(c, tiny(), h200());
    alone.push_back(simulate_training(c, tiny(), h200()));
  }
  ASSERT_TRUE(chosen.auto_choice);
  const AutoChoice& a = *chosen.auto_choice;
  ASSERT_EQ(a.chosen.size(), 4U);
  EXPECT_EQ(a.candidates, names);
  EXPECT_TRUE(a.refused.empty());
  for (std::size_t it = 0; it < 4; ++it) {
    std::vector<std::pair<double, std::string>> times;
    for (std::size_t i = 0; i < names.size(); ++i) times.emplace_back(alone[i].iteration_s[it], names[i]);
    std::stable_sort(times.begin(), times.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    EXPECT_DOUBLE_EQ(chosen.iteration_s[it], times[0].first) << "iteration " << it;
    EXPECT_EQ(a.chosen[it], times[0].second);
    EXPECT_EQ(a.runner_up[it], times[1].second);
    EXPECT_DOUBLE_EQ(a.runner_up_ratio[it], times[1].first / times[0].first);
  }
  // Never slower than the best candidate run alone.
  for (const auto& r : alone) EXPECT_LE(chosen.mean_iteration_s, r.mean_iteration_s * (1 + 1e-12));
  EXPECT_DOUBLE_EQ(chosen.tokens_per_iteration, alone[0].tokens_per_iteration);
  ASSERT_EQ(a.planning_s.size(), names.size());
  for (double s : a.planning_s) EXPECT_GT(s, 0);
  EXPECT_GT(a.simulating_s, 0);
}

// A candidate that refuses an iteration's batch (DCP: more computation blocks than it plans) sits it out, is
// named, and is never chosen; with pipeline stages DistCA runs its phase-aligned ticks among the candidates.
TEST(Training, AutoCandidatesThatRefuseSitOutAndPipelinesMix) {
  TrainingConfig config = small_config("distca", 2);
  config.planner = "auto";
  config.parallel.cp = 0;
  config.candidates = {"dcp", "distca", "packed"};
  config.planner_options.set("dcp-block", 8);
  config.planner_options.set("granularity", 16);
  const TrainingResult r = simulate_training(config, tiny(), h200());
  ASSERT_TRUE(r.auto_choice);
  const AutoChoice& a = *r.auto_choice;
  ASSERT_EQ(a.refused.size(), 1U);
  EXPECT_EQ(a.refused[0].rfind("dcp: dcp-block = 8", 0), 0U) << a.refused[0];
  EXPECT_EQ(std::count(a.chosen.begin(), a.chosen.end(), "dcp"), 0);
  EXPECT_EQ(a.planning_s[0], 0);
  TrainingConfig alone = small_config("distca", 2);
  alone.planner_options.set("granularity", 16);
  const TrainingResult distca = simulate_training(alone, tiny(), h200());
  EXPECT_LE(r.mean_iteration_s, distca.mean_iteration_s * (1 + 1e-12));
}

// auto with a deferring candidate (wlb) on its own is wlb: its queue fills in the warm-up and carries over
// every iteration, iteration for iteration the same times and tokens.
TEST(Training, AutoWithOnlyWlbIsWlb) {
  TrainingConfig config = small_config("wlb");
  config.iterations = 4;
  config.mode = config.baseline_mode;  // as auto runs a candidate that does not overlap its traffic
  config.parallel.cp = 0;
  config.parallel.cp = cp_degree_for(config, tiny(), h200());
  const TrainingResult wlb = simulate_training(config, tiny(), h200());
  ASSERT_NE(wlb.computed_work_share, 1);  // the data has outliers to hold back
  config.planner = "auto";
  config.parallel.cp = 0;
  config.candidates = {"wlb"};
  const TrainingResult chosen = simulate_training(config, tiny(), h200());
  EXPECT_EQ(chosen.iteration_s, wlb.iteration_s);
  EXPECT_DOUBLE_EQ(chosen.tokens_per_iteration, wlb.tokens_per_iteration);
  EXPECT_DOUBLE_EQ(chosen.carried_tokens, wlb.carried_tokens);
  EXPECT_DOUBLE_EQ(chosen.tokens_per_s, wlb.tokens_per_s);
}

// auto mixing a deferring candidate with others: whatever it chooses, every document drawn in the window is
// computed once or carried out of it (the computed tokens and the queue's growth add up to a non-deferring
// planner's tokens: a wlb try that was not chosen and still deferred documents would count them twice), and an
// iteration it gives to a non-deferring candidate is the faster of them (they hold nothing between
// iterations, so each runs exactly as alone).
TEST(Training, AutoWithWlbComputesEveryDocumentOnce) {
  const std::vector<std::string> names = {"wlb", "packed", "distca"};
  bool mixed = false;
  for (const int iterations : {3, 6, 10}) {
    TrainingConfig config = small_config("distca");
    config.planner = "auto";
    config.parallel.cp = 0;
    config.candidates = names;
    config.iterations = iterations;
    const TrainingResult chosen = simulate_training(config, tiny(), h200());
    std::vector<TrainingResult> alone;
    for (const std::string name : {"packed", "distca"}) {
      TrainingConfig c = small_config(name);
      c.iterations = iterations;
      c.mode = overlaps_traffic(name) ? config.mode : config.baseline_mode;
      alone.push_back(simulate_training(c, tiny(), h200()));
    }
    const double total = chosen.tokens_per_iteration * iterations + chosen.carried_tokens;
    EXPECT_NEAR(total, alone[0].tokens_per_iteration * iterations, 1e-9 * total) << iterations << " iterations";
    ASSERT_TRUE(chosen.auto_choice);
    const AutoChoice& a = *chosen.auto_choice;
    ASSERT_EQ(a.chosen.size(), static_cast<std::size_t>(iterations));
    const auto wlb_iterations = std::count(a.chosen.begin(), a.chosen.end(), "wlb");
    mixed = mixed || (wlb_iterations > 0 && wlb_iterations < iterations);
    for (int it = 0; it < iterations; ++it) {
      if (a.chosen[it] == "wlb") continue;
      EXPECT_DOUBLE_EQ(chosen.iteration_s[it], std::min(alone[0].iteration_s[it], alone[1].iteration_s[it]))
          << "iteration " << it;
    }
  }
  EXPECT_TRUE(mixed) << "no run mixed wlb with the others: the undoing of a try is untested";
}

// auto keeps up with the fastest fixed planner where that is wlb, whose iterations swing with what it
// releases: valued by its own tries, a try that released held documents looked slow, the others took those
// iterations, and the documents stayed held (auto at 0.64x wlb's tokens/s here, 0.72x with shared-question
// masks); valued by wlb's fixed run, auto follows wlb.
TEST(Training, AutoKeepsUpWithWlbWhereItIsTheFastestFixedPlanner) {
  for (const std::string mask : {"causal", "shared-question:4:20"}) {
    TrainingConfig config = small_config("distca");
    config.parallel.gpus = 64;
    config.dataset = "pretrain";
    config.max_doc_len = 32768;
    config.tokens_per_rank = 8192;
    config.iterations = 12;
    config.mask = mask;
    double best = 0;
    for (const std::string name : {"distca", "packed", "wlb"}) {
      TrainingConfig c = config;
      c.planner = name;
      c.mode = overlaps_traffic(name) ? config.mode : config.baseline_mode;
      c.parallel.cp = 0;
      c.parallel.cp = cp_degree_for(c, tiny(), h200());
      best = std::max(best, simulate_training(c, tiny(), h200()).tokens_per_s);
    }
    config.planner = "auto";
    config.parallel.cp = 0;
    config.candidates = {"distca", "packed", "wlb"};
    EXPECT_GE(simulate_training(config, tiny(), h200()).tokens_per_s, 0.97 * best) << mask;
  }
}

// A planner that holds nothing between iterations skips the warm-up but draws its data: its window is the
// later iterations of a run without warm-up, so every planner's window sees the same batches.
TEST(Training, WarmupOnlyDrawsForPlannersThatDeferNothing) {
  TrainingConfig c = small_config("packed");
  c.warmup_iterations = 0;
  c.iterations = 5;
  const TrainingResult all = simulate_training(c, tiny(), h200());
  c.warmup_iterations = 3;
  c.iterations = 2;
  const TrainingResult window = simulate_training(c, tiny(), h200());
  EXPECT_EQ(window.iteration_s, std::vector<double>(all.iteration_s.begin() + 3, all.iteration_s.end()));
}

// The steady state does not depend on the window's length: with the queue carried over (not drained into
// the window), the speedup over WLB-LLM of 4 iterations agrees with that of 16 within 2%, at a point where
// WLB-LLM carries documents out of both windows. (The drain it replaced put 15-40% of a short run's time
// into iterations without data.)
TEST(Training, SteadyStateSpeedupDoesNotDependOnTheIterationCount) {
  std::vector<double> speedups;
  for (const int iterations : {4, 16}) {
    std::vector<TrainingResult> runs;
    for (const std::string name : {"distca", "wlb"}) {
      TrainingConfig c = small_config(name);
      c.iterations = iterations;
      c.parallel.gpus = 64;
      c.parallel.microbatches = 8;
      runs.push_back(simulate_training(c, tiny(), h200()));
    }
    EXPECT_NE(runs[1].carried_tokens, 0) << iterations << " iterations";
    speedups.push_back(runs[0].tokens_per_s / runs[1].tokens_per_s);
  }
  EXPECT_NEAR(speedups[1], speedups[0], 0.02 * speedups[1]);
}

}  // namespace
}  // namespace fulcrum::sim
