// `fulcrum run`'s job on thread ranks (LocalCommunicator): every registered planner, forward and backward,
// equals the fp64 reference within 1e-5 relative error (fp32 storage).
#include "fulcrum/studies/attention_job.hpp"

#include "fulcrum/runtime/local_communicator.hpp"
#include "fulcrum/workload/length_source.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <mutex>
#include <set>
#include <string>
#include <variant>
#include <vector>

namespace fulcrum::studies {
namespace {

using runtime::Communicator;
using runtime::ReferenceKind;
using runtime::run_local_ranks;
constexpr double kTolerance = 1e-5;
// One mask of every kind, as the CLI spells them.
const std::vector<std::string>& every_mask_kind() {
  static const std::vector<std::string> masks = {"causal",
                                                 "full",
                                                 "window:96",
                                                 "lambda:16:128",
                                                 "blockwise:64:2",
                                                 "shared-question:4:20",
                                                 "vslash:0,1,2,100:0,1,64",
                                                 "blocksparse:64:0-0,1-0,1-1,3-1,5-5,7-2"};
  return masks;
}

// The job on `ranks` thread ranks; every rank's result is the same, rank 0's is returned.
JobResult rank0_result(const JobConfig& c, int ranks) {
  std::mutex mutex;
  JobResult result;
  run_local_ranks(ranks, [&](Communicator& comm) {
    auto r = run_attention_job(c, comm);
    std::lock_guard lock(mutex);
    if (comm.rank() == 0) result = std::move(r);
  });
  return result;
}

TEST(AttentionJob, EveryPlannerOnThreadRanksEqualsTheReference) {
  for (const auto& planner : planner_names()) {
    for (int ranks : {2, 4}) {
      JobConfig c;
      c.dataset = "uniform:16:700";
      c.tokens_per_rank = 256;
      c.seed = static_cast<std::uint64_t>(ranks);
      c.planner = planner;
      // Striped layouts take whole stripes: one document of every rank's tokens.
      if (make_planner(planner, c.planner_options())->document_length_multiple(ranks) > 1) {
        c.dataset = fmt::format("uniform:{0}:{0}", ranks * c.tokens_per_rank);
      }
      c.options.set("granularity", 16);
      c.options.set("cp-degree", 2);
      c.reference = ReferenceKind::kFp64;
      c.threads = 1;
      const JobResult result = rank0_result(c, ranks);
      EXPECT_LE(result.max_error(), kTolerance) << planner << " on " << ranks;
      EXPECT_EQ(result.forward.size(), static_cast<std::size_t>(ranks));
      EXPECT_EQ(result.timeline.events.empty(), result.tasks == 0) << planner << " on " << ranks;
    }
  }
}

// A CA-task reading only part of the keys its rows see (issue 20 item 4).
bool is_partial_kv(const Batch& batch, const CATask& task) {
  return task.keys != visible_key_hull(batch.documents[task.doc], task.query_ranges());
}

// DistCA with all of issue 20's options on, on thread ranks, forward and backward against fp64: documents
// crossing ranks in head and tail pieces, resident K/V sent to a rank once, and partial-K/V tasks whose
// partial outputs merge by LSE at the rows' owner; every mask kind, both schedules. The batches are long
// documents over short ranks, so rows are few next to their keys and the scheduler cuts along keys (the
// tiny model's Q+O are only twice its K/V per token, which favours such cuts; seeds where it does).
TEST(AttentionJob, DistcaPartialKvTasksWithHeadTailDocumentsEqualTheReference) {
  const std::vector<std::string>& masks = every_mask_kind();
  std::set<std::string> with_partial_tasks;  // the masks whose plans cut along keys
  for (std::size_t m = 0; m < masks.size(); ++m) {
    JobConfig c;
    c.dataset = "uniform:300:1500";
    c.mask = masks[m];
    c.tokens_per_rank = 128;
    c.seed = 23 + m;
    c.boundary_split = BoundarySplit::kHeadTail;
    c.planner = "distca";
    c.options.set("granularity", 16);
    c.options.set("partial-kv", 1);
    c.reference = ReferenceKind::kFp64;
    c.threads = 1;
    const int ranks = m % 2 == 0 ? 4 : 5;
    auto source = make_length_source(c.dataset, c.seed, c.tokens_per_rank);
    BatchStream stream([&] { return source->next(); }, ranks, c.tokens_per_rank, MaskSpec::parse(c.mask),
                       c.boundary_split);
    const Batch batch = stream.next();
    for (const auto& task : make_planner("distca", c.planner_options())->plan(batch).tasks) {
      if (is_partial_kv(batch, task)) with_partial_tasks.insert(c.mask);
    }
    for (CommMode mode : {CommMode::kPingPong, CommMode::kSingleStream}) {
      c.mode = mode;
      const JobResult result = rank0_result(c, ranks);
      EXPECT_LE(result.max_error(), kTolerance) << c.mask << " " << to_string(mode);
      EXPECT_GT(result.tasks, 0U);
    }
  }
  EXPECT_TRUE(with_partial_tasks.contains("causal"));
  EXPECT_GE(with_partial_tasks.size(), 6U) << "the batches should exercise partial-K/V tasks";
}

// MTraining's dynamic masks on thread ranks: the estimator runs over the ranks (each its own keys), every
// rank plans the same per-head masks, and the striped ring equals the fp64 reference on that mask.
TEST(AttentionJob, DynamicMasksEstimatedOnThreadRanksEqualTheReference) {
  for (int ranks : {2, 4}) {
    JobConfig c;
    c.dataset = fmt::format("uniform:{0}:{0}", ranks * 512);
    c.tokens_per_rank = 512;
    c.mask = "vslash-dynamic:0.9";
    c.planner = "mtraining";
    c.reference = ReferenceKind::kFp64;
    c.threads = 1;
    std::mutex mutex;
    std::vector<JobResult> results;
    run_local_ranks(ranks, [&](Communicator& comm) {
      auto r = run_attention_job(c, comm);
      std::lock_guard lock(mutex);
      results.push_back(std::move(r));
    });
    for (const auto& r : results) {
      ASSERT_TRUE(r.dynamic_masks.has_value());
      EXPECT_EQ(r.dynamic_masks->documents, 1);
      EXPECT_GE(r.dynamic_masks->recall_min, 0.9 - 1e-9);
      EXPECT_GT(r.dynamic_masks->sparsity, 0.0);
      EXPECT_LE(r.max_error(), kTolerance) << ranks << " ranks";
      EXPECT_TRUE(r.forward_plan == results.front().forward_plan) << "every rank planned the same masks";
    }
  }
}

// DCP with head blocks on thread ranks, forward and backward against fp64: tasks over head ranges, a
// row's heads merged at its owner. Every mask kind with 2 head blocks of the tiny model (its 2 GQA
// groups), and 4 of llama3-8b's 8 groups (each block 8 q heads reading 2 kv heads) on one mask.
TEST(AttentionJob, DcpHeadBlocksOnThreadRanksEqualTheReference) {
  struct Case {
    std::string model, mask;
    int head_blocks, ranks;
    Tokens tokens_per_rank;
  };
  std::vector<Case> cases;
  const std::vector<std::string>& masks = every_mask_kind();
  for (std::size_t m = 0; m < masks.size(); ++m) cases.push_back({"tiny", masks[m], 2, m % 2 == 0 ? 2 : 4, 256});
  cases.push_back({"llama3-8b", "lambda:16:64", 4, 2, 128});
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Case& k = cases[i];
    JobConfig c;
    c.dataset = "uniform:16:500";
    c.model = k.model;
    c.mask = k.mask;
    c.tokens_per_rank = k.tokens_per_rank;
    c.seed = 5 + i;  // a batch of its own per case
    c.planner = "dcp";
    c.options.set("dcp-block", 32);
    c.options.set("dcp-head-blocks", k.head_blocks);
    c.reference = ReferenceKind::kFp64;
    c.threads = 1;
    for (CommMode mode : {CommMode::kPingPong, CommMode::kSingleStream}) {
      c.mode = mode;
      const JobResult result = rank0_result(c, k.ranks);
      EXPECT_LE(result.max_error(), kTolerance)
          << k.model << " " << k.mask << " H=" << k.head_blocks << " seed " << c.seed;
      // What ran was head-split: every attention item covers one head block.
      int items = 0;
      for (const auto& program : result.forward_plan.programs) {
        for (const auto& instruction : program.instructions) {
          if (const auto* call = std::get_if<Attention>(&instruction.op)) {
            for (const auto& item : call->items) {
              ++items;
              EXPECT_EQ(item.heads.count(model_shape_preset(k.model).q_heads),
                        model_shape_preset(k.model).q_heads / k.head_blocks);
            }
          }
        }
      }
      EXPECT_GT(items, 0);
    }
  }
}

}  // namespace
}  // namespace fulcrum::studies
