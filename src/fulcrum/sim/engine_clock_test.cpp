// The engine must finish plans whose clock runs long enough that a flow's last few bytes take less than
// one ulp of the current time (a hang found from Python on realistic DistCA plans).
#include "fulcrum/cost/hardware_model.hpp"
#include "fulcrum/plan/compile.hpp"
#include "fulcrum/planners/planner.hpp"
#include "fulcrum/sim/engine.hpp"
#include "fulcrum/workload/batch.hpp"
#include "fulcrum/workload/length_source.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <future>
#include <thread>

namespace fulcrum::sim {
namespace {

TEST(SimEngineClock, LongPlansOnFastLinksFinish) {
  const ModelShape model = model_shape_preset("llama3-8b");
  auto source = make_length_source("lognormal:8:1.5", 0, 65536);
  const Batch batch = BatchStream([&] { return source->next(); }, 8, 65536).next();
  PlannerOptions options;
  options.model = model;
  options.set("tolerance", 0.05);
  const Assignment assignment = make_planner("distca", options)->plan(batch);
  const Plan plan = compile(assignment, head_layout(model, 2), Pass::kForward, CommMode::kPingPong);
  for (const char* name : {"a100-p4de", "h200-dgx"}) {
    // A hang must fail the test, not stall ctest: the simulation runs on a thread we may abandon.
    auto result = std::async(std::launch::async, [&] { return simulate_plan(plan, hardware_preset(name)); });
    if (result.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
      ADD_FAILURE() << name << ": simulate_plan did not finish within 60 s";
      std::_Exit(1);  // the abandoned thread never returns, so neither would the future's destructor
    }
    EXPECT_GT(result.get().makespan_s, 0) << name;
  }
}

}  // namespace
}  // namespace fulcrum::sim
