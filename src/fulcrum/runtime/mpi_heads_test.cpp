// Heads on real MPI ranks (ctest runs it under mpiexec with 2 and 4 processes): an Assignment whose
// tasks split the q heads of rows over servers, with a different mask per head (or GQA groups split at
// and inside a group), compiled (ping-pong and single stream), checked by verify_plan, and run forward
// and backward through the executor; every rank's O, LSE, dQ, dK and dV equal the fp64 reference within
// 1e-5 (fp32 storage), and the job moves exactly the plans' head-sliced bytes, less than whole rows. The
// verdict of each test is combined over all ranks, so a failure on any rank fails it everywhere.
#include "fulcrum/core/error.hpp"
#include "fulcrum/plan/compile.hpp"
#include "fulcrum/plan/plan_test_cases.hpp"
#include "fulcrum/plan/program_verify.hpp"
#include "fulcrum/plan/verify.hpp"
#include "fulcrum/runtime/attention_data.hpp"
#include "fulcrum/runtime/executor.hpp"
#include "fulcrum/runtime/mpi_communicator.hpp"
#include "fulcrum/runtime/mpi_test_support.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

namespace fulcrum::runtime {
namespace {

constexpr double kTolerance = 1e-5;
const HeadLayout kHeads{4, 2, 16, 4};

MpiCommunicator* g_comm = nullptr;

// This rank's largest relative error over O, LSE, dQ, dK, dV, as max diff / max reference over all ranks.
// The bytes all ranks sent must be the plans' message bytes, and less than the same messages over
// whole rows.
double run_and_compare(const Assignment& a, CommMode schedule, const HeadLayout& heads = kHeads) {
  Communicator& comm = *g_comm;
  const Plan forward = compile(a, heads, Pass::kForward, schedule);
  const Plan backward = compile(a, heads, Pass::kBackward, schedule);
  for (const Plan* plan : {&forward, &backward}) {
    const auto report = verify_plan(*plan, a.batch);
    if (!report.ok()) fail("verify_plan: {}", report.summary());
  }
  RankBuffers fb(forward.programs[comm.rank()], heads);
  fill_inputs(forward, a.batch, 11, fb);
  double sent = execute(forward, fb, comm, {0}).summary.bytes_sent;
  RankBuffers bb(backward.programs[comm.rank()], heads);
  fill_inputs(backward, a.batch, 11, bb);
  for (const char* name : {"o", "lse"}) bb.copy_from(fb, name);
  sent += execute(backward, bb, comm, {0}).summary.bytes_sent;
  const ErrorParts parts = compare_with_reference(forward, fb, backward, bb, a.batch, 11, ReferenceKind::kFp64);
  std::vector<double> mine(parts.max_diff.begin(), parts.max_diff.end());
  mine.insert(mine.end(), parts.max_ref.begin(), parts.max_ref.end());
  mine.push_back(sent);
  constexpr std::size_t kPerRank = 11;
  const std::vector<double> all = comm.all_gather(std::span<const double>(mine));
  double worst = 0, all_sent = 0;
  for (std::size_t t = 0; t < 5; ++t) {
    double diff = 0, ref = 0;
    for (std::size_t r = 0; r < all.size() / kPerRank; ++r) {
      diff = std::max(diff, all[r * kPerRank + t]);
      ref = std::max(ref, all[r * kPerRank + 5 + t]);
    }
    worst = std::max(worst, ref > 0 ? diff / ref : diff);
  }
  for (std::size_t r = 0; r < all.size() / kPerRank; ++r) all_sent += all[r * kPerRank + 10];
  const double planned = fulcrum::testing::message_bytes(forward) + fulcrum::testing::message_bytes(backward);
  EXPECT_DOUBLE_EQ(all_sent, planned);
  EXPECT_LT(planned, fulcrum::testing::message_bytes(forward, true) + fulcrum::testing::message_bytes(backward, true))
      << "head-split plans move less than whole rows";
  return worst;
}

// Runs this rank's part of a test, then fails the test on every rank if it failed on any.
void on_all_ranks(const std::function<void()>& body) {
  try {
    body();
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what();
  }
  const double ok = ::testing::Test::HasFailure() ? 0.0 : 1.0;
  const std::vector<double> all = g_comm->all_gather(std::span(&ok, 1));
  for (std::size_t r = 0; r < all.size(); ++r) EXPECT_EQ(all[r], 1.0) << "rank " << r << " failed this test";
}

TEST(MpiHeads, HeadSplitTasksWithPerHeadMasksEqualTheFp64Reference) {
  on_all_ranks([] {
    const Assignment a = fulcrum::testing::head_split_assignment(g_comm->size());
    const auto report = verify(a, a.batch);
    ASSERT_TRUE(report.ok()) << report.summary();
    for (CommMode s : {CommMode::kPingPong, CommMode::kSingleStream}) {
      EXPECT_LE(run_and_compare(a, s), kTolerance) << to_string(s);
    }
  });
}

TEST(MpiHeads, GqaHeadSplitsEqualTheFp64Reference) {
  on_all_ranks([] {
    const HeadLayout gqa{8, 2, 16, 4};
    for (int split : {4, 3}) {
      const Assignment a = fulcrum::testing::gqa_head_split_assignment(g_comm->size(), split);
      ASSERT_TRUE(verify(a, a.batch).ok()) << verify(a, a.batch).summary();
      for (CommMode s : {CommMode::kPingPong, CommMode::kSingleStream}) {
        EXPECT_LE(run_and_compare(a, s, gqa), kTolerance) << "split " << split << " " << to_string(s);
      }
    }
  });
}

TEST(MpiHeads, RandomHeadSplitAssignmentsEqualTheFp64Reference) {
  on_all_ranks([] {
    int ran = 0;
    for (std::uint64_t seed = 0; ran < 6; ++seed) {
      // Same seed on every rank; keep those drawn for this job's rank count.
      const Assignment a = fulcrum::testing::random_head_assignment(seed, kHeads.q_heads, g_comm->size());
      if (a.batch.ranks != g_comm->size()) continue;
      ++ran;
      EXPECT_LE(run_and_compare(a, CommMode::kPingPong), kTolerance) << "seed " << seed;
    }
  });
}

}  // namespace
}  // namespace fulcrum::runtime

int main(int argc, char** argv) {
  using namespace fulcrum::runtime;
  ::testing::InitGoogleTest(&argc, argv);
  try {
    MpiSession session(&argc, &argv);
    fulcrum::runtime::testing::quiet_other_ranks(session.world_rank());
    MpiCommunicator comm(MpiProgress::kThread);
    comm.set_timeout_s(60);
    g_comm = &comm;
    const int status = fulcrum::runtime::testing::run_all_tests_on_every_rank(comm);
    g_comm = nullptr;
    return status;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
