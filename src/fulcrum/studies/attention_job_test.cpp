// `fulcrum run`'s job on thread ranks (LocalCommunicator): every registered planner, forward and backward,
// equals the fp64 reference within 1e-5 relative error (fp32 storage).
#include "fulcrum/studies/attention_job.hpp"

#include "fulcrum/runtime/local_communicator.hpp"

#include <gtest/gtest.h>

#include <mutex>

namespace fulcrum::studies {
namespace {

using runtime::Communicator;
using runtime::ReferenceKind;
using runtime::run_local_ranks;
constexpr double kTolerance = 1e-5;

TEST(AttentionJob, EveryPlannerOnThreadRanksEqualsTheReference) {
  for (const auto& planner : planner_names()) {
    for (int ranks : {2, 4}) {
      JobConfig c;
      c.dataset = "uniform:16:700";
      c.tokens_per_rank = 256;
      c.seed = static_cast<std::uint64_t>(ranks);
      c.planner = planner;
      c.options.set("granularity", 16);
      c.options.set("cp-degree", 2);
      c.reference = ReferenceKind::kFp64;
      c.threads = 1;
      std::mutex mutex;
      JobResult result;
      run_local_ranks(ranks, [&](Communicator& comm) {
        auto r = run_attention_job(c, comm);
        std::lock_guard lock(mutex);
        if (comm.rank() == 0) result = std::move(r);
      });
      EXPECT_LE(result.max_error(), kTolerance) << planner << " on " << ranks;
      EXPECT_EQ(result.forward.size(), static_cast<std::size_t>(ranks));
      EXPECT_EQ(result.timeline.events.empty(), result.tasks == 0) << planner << " on " << ranks;
    }
  }
}

}  // namespace
}  // namespace fulcrum::studies
