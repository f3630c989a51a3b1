// The executor on thread ranks (LocalCommunicator): compiled plans of random assignments, forward and
// backward, equal the fp64 reference within 1e-5 relative error (fp32 storage).
#include "fulcrum/runtime/executor.hpp"

#include "fulcrum/plan/compile.hpp"
#include "fulcrum/plan/plan_test_cases.hpp"
#include "fulcrum/plan/program_verify.hpp"
#include "fulcrum/plan/verify.hpp"
#include "fulcrum/runtime/attention_data.hpp"
#include "fulcrum/runtime/local_communicator.hpp"
#include "fulcrum/workload/head_masks.hpp"
#include "fulcrum/workload/mask_test_cases.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <omp.h>

#include <vector>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <numeric>

namespace fulcrum::runtime {
namespace {

constexpr double kTolerance = 1e-5;
const HeadLayout kHeads{4, 2, 16, 4};

// Runs both passes of `a` on its ranks and returns the largest relative error of the five tensors.
// The bytes the ranks sent must be what the plans' messages carry (their heads only).
double run_and_compare(const Assignment& a, CommMode schedule, const HeadLayout& heads = kHeads) {
  const Plan forward = compile(a, heads, Pass::kForward, schedule);
  const Plan backward = compile(a, heads, Pass::kBackward, schedule);
  std::vector<ErrorParts> parts(static_cast<std::size_t>(a.batch.ranks));
  std::vector<double> sent(parts.size(), 0);
  run_local_ranks(a.batch.ranks, [&](Communicator& comm) {
    RankBuffers fb(forward.programs[comm.rank()], heads);
    fill_inputs(forward, a.batch, 7, fb);
    sent[comm.rank()] += execute(forward, fb, comm, {0}).summary.bytes_sent;
    RankBuffers bb(backward.programs[comm.rank()], heads);
    fill_inputs(backward, a.batch, 7, bb);
    for (const char* name : {"o", "lse"}) bb.copy_from(fb, name);  // forward outputs, backward inputs
    sent[comm.rank()] += execute(backward, bb, comm, {0}).summary.bytes_sent;
    parts[comm.rank()] = compare_with_reference(forward, fb, backward, bb, a.batch, 7, ReferenceKind::kFp64);
  });
  EXPECT_DOUBLE_EQ(std::accumulate(sent.begin(), sent.end(), 0.0),
                   testing::message_bytes(forward) + testing::message_bytes(backward));
  double worst = 0;
  for (std::size_t t = 0; t < 5; ++t) {
    double diff = 0, ref = 0;
    for (const auto& p : parts) {
      diff = std::max(diff, p.max_diff[t]);
      ref = std::max(ref, p.max_ref[t]);
    }
    worst = std::max(worst, ref > 0 ? diff / ref : diff);
  }
  return worst;
}

TEST(Executor, RandomAssignmentsEqualTheReference) {
  const std::vector<MaskSpec> masks =
      testing::with_every_kind({MaskSpec::causal(), MaskSpec::full(), MaskSpec::lambda(4, 24),
                                MaskSpec::shared_question(3, 20), MaskSpec::vertical_slash({0, 3, 50}, {0, 1, 17})});
  for (std::uint64_t seed = 0; seed < 40; ++seed) {
    const Assignment a = testing::random_assignment(seed, masks[seed % std::size(masks)]);
    for (CommMode s : {CommMode::kPingPong, CommMode::kSingleStream}) {
      EXPECT_LE(run_and_compare(a, s), kTolerance) << "seed " << seed << " " << to_string(s);
    }
  }
}

// Ring schedules (compile_ring): every rank's rows against every rank's keys that some row sees (what
// the ring planners emit), as flat rings and as hierarchical rings of every machine size that divides
// the ranks (1 rank per machine: an outer ring only), on 1-8 ranks, masks of every kind and documents
// with one mask per head; both passes verify and equal the reference.
TEST(ExecutorRing, FlatAndHierarchicalRingsEqualTheReference) {
  const std::vector<MaskSpec> masks = testing::with_every_kind({MaskSpec::causal(), MaskSpec::lambda(4, 24)});
  for (std::uint64_t seed = 0; seed < 12; ++seed) {
    Assignment a = seed % 3 == 1 ? testing::random_head_assignment(seed, kHeads.q_heads, 8)
                                 : testing::random_assignment(seed, masks[seed % masks.size()], 8);
    a.tasks.clear();
    for (const auto& rows : a.batch.segments) {
      const auto& doc = a.batch.documents[rows.doc];
      const auto runs = mask_runs(doc.mask, doc.head_masks, {});
      for (const auto& keys : a.batch.segments_of(rows.doc)) {
        if (!keys_needed(runs, rows.tokens, keys.tokens, doc.length).empty())
          a.tasks.push_back({rows.doc, {rows.tokens, Range{}}, keys.tokens, rows.rank});
      }
    }
    a.transfers = minimal_transfers(a.batch, a.tasks);
    ASSERT_TRUE(verify(a, a.batch).ok()) << verify(a, a.batch).summary();
    const int ranks = a.batch.ranks;
    for (int node_ranks = 1; node_ranks <= ranks; ++node_ranks) {
      if (ranks % node_ranks != 0) continue;
      a.ring_node_ranks = node_ranks;
      const std::string what = fmt::format("seed {}: {} ranks, {} per machine", seed, ranks, node_ranks);
      for (Pass pass : {Pass::kForward, Pass::kBackward}) {
        const auto report = verify_plan(compile(a, kHeads, pass, CommMode::kSingleStream), a.batch);
        EXPECT_TRUE(report.ok()) << what << " " << to_string(pass) << ": " << report.summary();
      }
      EXPECT_LE(run_and_compare(a, CommMode::kSingleStream), kTolerance) << what;
    }
  }
}

// Heads: tasks over different head ranges of the same rows on different servers, one mask per head
// (causal, sliding window and lambda mixed in a document); both schedules, both passes.
TEST(ExecutorHeads, HeadSplitAssignmentsEqualTheReference) {
  for (int ranks : {2, 3, 4}) {
    const Assignment a = testing::head_split_assignment(ranks);
    ASSERT_TRUE(verify(a).ok()) << verify(a).summary();
    for (CommMode s : {CommMode::kPingPong, CommMode::kSingleStream}) {
      EXPECT_LE(run_and_compare(a, s), kTolerance) << ranks << " ranks " << to_string(s);
    }
  }
  for (std::uint64_t seed = 0; seed < 20; ++seed) {
    const Assignment a = testing::random_head_assignment(seed, kHeads.q_heads);
    for (CommMode s : {CommMode::kPingPong, CommMode::kSingleStream}) {
      EXPECT_LE(run_and_compare(a, s), kTolerance) << "seed " << seed << " " << to_string(s);
    }
  }
}

// GQA (8 q heads over 2 kv heads) split over servers by heads: [0, 4) and [4, 8) (one kv group each)
// and [0, 3) and [3, 8) (kv head 0 read on two servers, its dK/dV summed at the owner); then random
// head cuts, which split groups anywhere. Forward and backward equal the fp64 reference, and the ranks
// move less than the same messages over whole rows.
TEST(ExecutorHeads, GqaHeadSplitsMoveOnlyTheirHeadsAndEqualTheReference) {
  const HeadLayout gqa{8, 2, 16, 4};
  for (int ranks : {2, 3, 4}) {
    for (int split : {4, 3}) {
      const Assignment a = testing::gqa_head_split_assignment(ranks, split);
      ASSERT_TRUE(verify(a).ok()) << verify(a).summary();
      for (CommMode s : {CommMode::kPingPong, CommMode::kSingleStream}) {
        EXPECT_LE(run_and_compare(a, s, gqa), kTolerance) << ranks << " ranks, split " << split << " " << to_string(s);
        const Plan plan = compile(a, gqa, Pass::kBackward, s);
        EXPECT_LT(testing::message_bytes(plan), testing::message_bytes(plan, true));
      }
    }
  }
  for (std::uint64_t seed = 0; seed < 12; ++seed) {
    const Assignment a = testing::random_head_assignment(seed, gqa.q_heads);
    EXPECT_LE(run_and_compare(a, CommMode::kPingPong, gqa), kTolerance) << "seed " << seed;
  }
}

// Signal mode keeps the schedule's synchronisation but moves 1 byte per message.
TEST(Executor, SignalModeMovesOneBytePerMessage) {
  const Assignment a = testing::random_assignment(5, MaskSpec::causal());
  const Plan forward = compile(a, kHeads, Pass::kForward, CommMode::kSignal);
  std::vector<double> sent(static_cast<std::size_t>(a.batch.ranks), -1), messages(sent.size(), 0);
  run_local_ranks(a.batch.ranks, [&](Communicator& comm) {
    RankBuffers fb(forward.programs[comm.rank()], kHeads);
    fill_inputs(forward, a.batch, 7, fb);
    sent[comm.rank()] = execute(forward, fb, comm, {0}).summary.bytes_sent;
  });
  for (const auto& p : forward.programs) {
    for (const auto& i : p.instructions) {
      if (const auto* l = std::get_if<CommLaunch>(&i.op)) messages[p.rank] += static_cast<double>(l->sends.size());
    }
  }
  EXPECT_EQ(sent, messages);
  EXPECT_GT(*std::max_element(messages.begin(), messages.end()), 0) << "the assignment must move something";
}

// ExecuteOptions::deterministic reaches the kernels: dK/dV (summed over the tasks that read the same
// key rows) are bitwise equal with 1 and 3 kernel threads per rank.
TEST(Executor, DeterministicBackwardIsBitwiseRepeatableAcrossThreadCounts) {
  const Assignment a = testing::random_assignment(3, MaskSpec::causal());
  const Plan forward = compile(a, kHeads, Pass::kForward, CommMode::kPingPong);
  const Plan backward = compile(a, kHeads, Pass::kBackward, CommMode::kPingPong);
  auto gradients = [&](int threads) {
    std::vector<std::vector<float>> out(static_cast<std::size_t>(a.batch.ranks));
    run_local_ranks(a.batch.ranks, [&](Communicator& comm) {
      omp_set_num_threads(threads);  // this rank thread's kernel threads
      RankBuffers fb(forward.programs[comm.rank()], kHeads);
      fill_inputs(forward, a.batch, 7, fb);
      execute(forward, fb, comm, {0, true});
      RankBuffers bb(backward.programs[comm.rank()], kHeads);
      fill_inputs(backward, a.batch, 7, bb);
      for (const char* name : {"o", "lse"}) bb.copy_from(fb, name);
      execute(backward, bb, comm, {0, true});
      for (const char* name : {"dk", "dv"}) {
        const kernels::HeadTensor<float> view = bb.view<float>(bb.index(name));
        out[comm.rank()].insert(out[comm.rank()].end(), view.data, view.data + view.size());
      }
    });
    return out;
  };
  EXPECT_EQ(gradients(1), gradients(3));
}

}  // namespace
}  // namespace fulcrum::runtime

namespace fulcrum::runtime {
namespace {

// Rank 1 computes rank 0's rows: rank 0 sends in its dispatch (launch 0) and receives in its return
// (launch 1). Rank 0's wait for the return starts at 1.0 s; rank 1 starts the return at 3.0 s and the
// data lands at 3.5 s; rank 0 wakes at 3.6 s: 2 s of waiting for a slower rank, 0.6 s exposed.
TEST(AttributeWaits, SplitsBlockedTimeAtTheLastPeersStart) {
  Assignment a;
  a.batch = pack_batch({{0, 8, MaskSpec::causal()}}, 2, 4);
  a.tasks = {{0, {Range{0, 4}, Range{}}, {0, 4}, 1}, {0, {Range{4, 8}, Range{}}, {0, 8}, 1}};
  const Plan plan = compile(a, kHeads, Pass::kForward, CommMode::kSingleStream);
  ExecutionResult r;
  r.launches = {{0, 0.0, 0.0, 0.1, 0.1}, {1, 0.2, 1.0, 3.6, 3.5}};
  const std::vector<std::vector<double>> launched = {{0.0, 0.2}, {0.0, 3.0}};
  attribute_waits(plan, 0, launched, r);
  EXPECT_NEAR(r.summary.peer_wait_s, 2.0, 1e-12);
  EXPECT_NEAR(r.summary.exposed_comm_s, 0.1 + 0.6, 1e-12);
  EXPECT_NEAR(r.summary.comm_s, 0.1 + 0.6, 1e-12) << "[0, 0.1] and [3.0, 3.6]";
}

}  // namespace
}  // namespace fulcrum::runtime
