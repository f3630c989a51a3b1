// Same seed, any thread count: every registered planner gives byte-identical serialized plans (binary
// encoding, forward and backward) and the identical simulated timeline at 1, 2 and 4 OpenMP threads.
// Rerunning at one thread count would not catch a parallel loop whose result depends on the schedule
// (a reduction in thread order, a first-come tie break); changing the thread count between runs does.
#include "fulcrum/cost/hardware_model.hpp"
#include "fulcrum/plan/compile.hpp"
#include "fulcrum/plan/plan_test_cases.hpp"
#include "fulcrum/plan/serialize.hpp"
#include "fulcrum/planners/planner.hpp"
#include "fulcrum/sim/engine.hpp"
#include "fulcrum/workload/length_source.hpp"

#include <fmt/format.h>

#include <gtest/gtest.h>
#include <omp.h>

#include <map>

namespace fulcrum::sim {
namespace {

// 8 ranks on 2 machines of 4 (so DCP partitions hierarchically), masks that cut documents differently.
PlannerOptions options() {
  PlannerOptions o;
  o.model = model_shape_preset("tiny");
  o.set("granularity", 64).set("cp-degree", 4).set("dcp-block", 256);
  o.devices_per_machine = 4;
  o.seed = 7;
  return o;
}

Batch batch(std::uint64_t seed, const MaskSpec& mask) {
  auto source = make_length_source("lognormal:7:1.2", seed, 2048);
  BatchStream stream([&] { return source->next(); }, 8, 2048, mask);
  return stream.next();
}

// Everything a run produces that must not depend on the thread count, as bytes: both plans' binary
// encodings and both simulated timelines with every time in hexadecimal floating point (exact).
std::string plan_and_timeline(const std::string& planner, std::uint64_t seed, const MaskSpec& mask) {
  const auto p = make_planner(planner, options());
  const Batch b = batch(seed, mask);
  const Assignment a = p->plan(testing::with_length_multiple(b, p->document_length_multiple(b.ranks)));
  const HardwareModel hardware = hardware_preset("h200-dgx");
  std::string out;
  for (Pass pass : {Pass::kForward, Pass::kBackward}) {
    const Plan plan = compile(a, head_layout(options().model, 2), pass, CommMode::kPingPong);
    const auto bytes = to_binary(plan);
    out.append(bytes.begin(), bytes.end());
    const SimResult sim = simulate_plan(plan, hardware);
    out += fmt::format("makespan {:a}\n", sim.makespan_s);
    for (const auto& rank : sim.ranks) {
      for (const auto& e : rank.events) {
        out += fmt::format("{} {} {} {} {:a} {:a} {:a} {:a}\n", e.rank, static_cast<int>(e.track), e.stream, e.name,
                           e.start_s, e.end_s, e.bytes, e.flops);
      }
    }
  }
  return out;
}

TEST(ThreadDeterminism, EveryPlannerGivesIdenticalPlanBytesAndTimelineAt1To4Threads) {
  const int saved = omp_get_max_threads();
  const MaskSpec masks[] = {MaskSpec::causal(), MaskSpec::sliding_window(300), MaskSpec::shared_question(3, 40)};
  std::map<std::string, std::string> at_one_thread;
  for (int threads : {1, 2, 4}) {
    omp_set_num_threads(threads);
    for (const auto& planner : planner_names()) {
      for (std::uint64_t seed : {3u, 17u}) {
        for (const auto& mask : masks) {
          const std::string key = fmt::format("{} seed {} mask {}", planner, seed, mask.to_string());
          const std::string got = plan_and_timeline(planner, seed, mask);
          if (threads == 1) {
            at_one_thread[key] = got;
            continue;
          }
          // EXPECT_TRUE, not EXPECT_EQ: a failure should name the case, not print kilobytes of plan.
          EXPECT_TRUE(got == at_one_thread.at(key)) << key << ": differs at " << threads << " threads";
        }
      }
    }
  }
  omp_set_num_threads(saved);
  EXPECT_EQ(at_one_thread.size(), planner_names().size() * 2 * std::size(masks));
}

}  // namespace
}  // namespace fulcrum::sim
