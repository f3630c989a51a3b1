// Real MPI ranks (run under mpiexec by ctest with 2 and 4 processes). Every rank runs the same tests in
// the same order; each test ends by combining its verdict over all ranks with all_gather, so a rank
// whose check failed fails the test everywhere, and no rank is left waiting for one that moved on.
//
// With --fail-on-rank=R the binary instead plays a failing job: rank R throws, prints its error and
// calls abort; the other ranks wait for a message from it that never comes (mpi_abort_check.py).
#include "fulcrum/runtime/mpi_communicator.hpp"
#include "fulcrum/runtime/mpi_test_support.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/runtime/communicator_test_cases.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <thread>
#include <vector>

namespace fulcrum::runtime {
namespace {

MpiCommunicator* g_verdict = nullptr;  // a kNone communicator owned by main, only for verdicts

// Runs this rank's part of a test, then fails the test on every rank if it failed on any.
void on_all_ranks(const std::function<void()>& body) {
  try {
    body();
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what();
  }
  const double ok = ::testing::Test::HasFailure() ? 0.0 : 1.0;
  const std::vector<double> all = g_verdict->all_gather(std::span(&ok, 1));
  for (std::size_t r = 0; r < all.size(); ++r) EXPECT_EQ(all[r], 1.0) << "rank " << r << " failed this test";
}

class MpiComm : public ::testing::TestWithParam<MpiProgress> {
 protected:
  std::unique_ptr<MpiCommunicator> make() const {
    auto comm = std::make_unique<MpiCommunicator>(GetParam());
    comm->set_timeout_s(30);  // far below ctest's 120 s: a hang becomes an error naming the peer
    return comm;
  }
};

TEST_P(MpiComm, RingDeliversEveryByte) {
  on_all_ranks([&] {
    auto comm = make();
    for (std::size_t bytes : {std::size_t{0}, std::size_t{1}, std::size_t{1000}, std::size_t{1} << 20}) {
      const auto result = testing::run_exchange(*comm, testing::ring_exchange(comm->size(), bytes), 1, 1);
      EXPECT_EQ(result.wrong_bytes, 0u) << result.first_problem;
    }
  });
}

TEST_P(MpiComm, AllToAllDeliversEveryByte) {
  on_all_ranks([&] {
    auto comm = make();
    for (std::size_t bytes : {std::size_t{8}, std::size_t{1} << 16}) {
      const auto result = testing::run_exchange(*comm, testing::all_to_all_exchange(comm->size(), bytes), 2, 3);
      EXPECT_EQ(result.wrong_bytes, 0u) << result.first_problem;
    }
  });
}

TEST_P(MpiComm, RandomExchangesWithManyLaunchesDeliverEveryByte) {
  on_all_ranks([&] {
    auto comm = make();
    for (std::uint64_t seed = 1; seed <= 8; ++seed) {
      const auto plan = testing::random_exchange(comm->size(), seed, 3, 1 << 17, comm->max_tag());
      const auto result = testing::run_exchange(*comm, plan, 1 + static_cast<int>(seed % 4), seed);
      EXPECT_EQ(result.wrong_bytes, 0u) << "seed " << seed << ": " << result.first_problem;
      for (const LaunchTimes& t : result.times) EXPECT_LE(t.launched_s, t.completed_s);
    }
  });
}

TEST_P(MpiComm, AllGatherConcatenatesInRankOrder) {
  on_all_ranks([&] {
    auto comm = make();
    for (int round = 0; round < 20; ++round) {
      const double mine[3] = {comm->rank() * 1.0, round + 0.5, comm->rank() * 1000.0 + round};
      const std::vector<double> all = comm->all_gather(mine);
      ASSERT_EQ(all.size(), 3u * static_cast<std::size_t>(comm->size()));
      for (std::size_t r = 0; r < static_cast<std::size_t>(comm->size()); ++r) {
        EXPECT_EQ(all[3 * r], static_cast<double>(r));
        EXPECT_EQ(all[3 * r + 2], static_cast<double>(r) * 1000.0 + round);
      }
    }
  });
}

TEST_P(MpiComm, BarrierReleasesNobodyBeforeTheLastArrives) {
  on_all_ranks([&] {
    auto comm = make();
    // The ranks share one CLOCK_MONOTONIC (one machine), so their times compare directly.
    if (comm->rank() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const double arrived_s = Communicator::now_s();
    comm->barrier();
    const double left_s = Communicator::now_s();
    const std::vector<double> arrivals = comm->all_gather(std::span(&arrived_s, 1));
    for (double a : arrivals) EXPECT_GE(left_s, a);
  });
}

TEST_P(MpiComm, MissingSenderTimesOutNamingThePeer) {
  on_all_ranks([&] {
    auto comm = make();
    if (comm->rank() != 0) return;  // rank 1 never sends
    comm->set_timeout_s(0.5);
    int value = 0;
    const WireMessage receive{1, 9, &value, sizeof(value)};
    const int handle = comm->launch({}, std::span(&receive, 1));
    const double start_s = Communicator::now_s();
    try {
      comm->wait(handle);
      ADD_FAILURE() << "wait returned without the message";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()),
                "rank 0: timed out after 0.5 s waiting for launch 0 (1 of 1 messages incomplete: receive from "
                "rank 1 tag 9)");
    }
    EXPECT_LT(Communicator::now_s() - start_s, 5.0);
  });
}

// A timed-out wait throws, and its caller frees the receive buffer while unwinding: the message that comes
// after must not land there (the progress thread did write a late 512 KiB message into freed memory, seen
// by ASan in `fulcrum prefill` with a stopped rank). The timed-out receive is cancelled, so the late
// message waits for the next receive of its tag, which gets it whole.
TEST_P(MpiComm, MessageAfterATimeoutLandsInTheNextReceiveNotTheFreedBuffer) {
  on_all_ranks([&] {
    auto comm = make();
    constexpr std::size_t kFloats = 128 * 1024;  // 512 KiB: past the eager limit, as in the prefill's all-reduce
    comm->barrier();
    if (comm->rank() == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2000));  // after rank 0's watchdog (0.5 s)
      std::vector<float> data(kFloats);
      for (std::size_t i = 0; i < kFloats; ++i) data[i] = static_cast<float>(i);
      const WireMessage send{0, 7, data.data(), kFloats * sizeof(float)};
      comm->wait(comm->launch(std::span(&send, 1), {}));
    }
    if (comm->rank() != 0) return;
    comm->set_timeout_s(0.5);
    {
      std::vector<float> freed(kFloats, -1.0F);
      const WireMessage receive{1, 7, freed.data(), kFloats * sizeof(float)};
      EXPECT_THROW(comm->wait(comm->launch({}, std::span(&receive, 1))), Error);
    }
    std::vector<float> later(kFloats, -2.0F);  // may reuse the freed memory (ASan quarantines it instead)
    std::this_thread::sleep_for(std::chrono::milliseconds(3000));  // rank 1 sends meanwhile
    EXPECT_EQ(std::count(later.begin(), later.end(), -2.0F), static_cast<long>(kFloats));
    comm->set_timeout_s(30);
    std::vector<float> next(kFloats, -3.0F);
    const WireMessage receive{1, 7, next.data(), kFloats * sizeof(float)};
    comm->wait(comm->launch({}, std::span(&receive, 1)));
    for (std::size_t i = 0; i < kFloats; ++i) ASSERT_EQ(next[i], static_cast<float>(i)) << "float " << i;
  });
}

// The last rank reaches the barrier (and then the all_gather) only after the others' watchdog fired: rank 0,
// its successor in the ring of arrival notes, names it; the others can only say someone is missing.
TEST_P(MpiComm, LateRankAtCollectiveTimesOutNamedByItsSuccessor) {
  on_all_ranks([&] {
    auto comm = make();
    const int late = comm->size() - 1;
    for (const char* what : {"barrier", "all_gather"}) {
      auto collective = [&] {
        const double value = 1;
        if (std::string(what) == "barrier") {
          comm->barrier();
        } else {
          comm->all_gather(std::span(&value, 1));
        }
      };
      if (comm->rank() == late) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1500));
        collective();  // completes: every other rank posted it before timing out
        continue;
      }
      comm->set_timeout_s(0.5);
      try {
        collective();
        ADD_FAILURE() << what << " returned before rank " << late << " arrived";
      } catch (const Error& e) {
        const std::string message = e.what();
        const std::string expected =
            comm->rank() == 0 ? fmt::format("rank {} never arrived", late) : std::string("some rank never arrived");
        EXPECT_NE(message.find(fmt::format("rank {}: timed out after 0.5 s in {}", comm->rank(), what)),
                  std::string::npos)
            << message;
        EXPECT_NE(message.find(expected), std::string::npos) << message;
      }
      comm->set_timeout_s(30);
    }
  });
}

TEST_P(MpiComm, BadTagAndPeerAreRejected) {
  on_all_ranks([&] {
    auto comm = make();
    int value = 0;
    // OpenMPI's MPI_TAG_UB is INT_MAX, so there may be no int above it: then test the lower bound.
    const int bad = comm->max_tag() < std::numeric_limits<int>::max() ? comm->max_tag() + 1 : -1;
    const WireMessage big_tag{0, bad, &value, sizeof(value)};
    const WireMessage bad_peer{comm->size(), 0, &value, sizeof(value)};
    try {
      comm->launch(std::span(&big_tag, 1), {});
      ADD_FAILURE() << "tag " << bad << " outside [0, MPI_TAG_UB] accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("MPI_TAG_UB"), std::string::npos) << e.what();
    }
    EXPECT_THROW(comm->launch({}, std::span(&bad_peer, 1)), Error);
  });
}

// The point of the progress thread: a large transfer finishes while the caller computes.
TEST(MpiCommOverlap, ProgressThreadCompletesLargeMessageDuringCompute) {
  on_all_ranks([&] {
    MpiCommunicator comm(MpiProgress::kThread);
    comm.set_timeout_s(30);
    const int partner = comm.rank() ^ 1;
    if (partner >= comm.size()) return;  // odd rank count: the last one sits out
    constexpr std::size_t kBytes = std::size_t{64} << 20;
    std::vector<char> out(kBytes, static_cast<char>(comm.rank() + 1));
    std::vector<char> in(kBytes, 0);
    const WireMessage send{partner, 1, out.data(), kBytes};
    const WireMessage receive{partner, 1, in.data(), kBytes};
    comm.barrier();
    const int handle = comm.launch(std::span(&send, 1), std::span(&receive, 1));
    // "Compute": a dependent arithmetic chain for 1.5 s, touching no MPI.
    double x = 1.0;
    const double until_s = Communicator::now_s() + 1.5;
    while (Communicator::now_s() < until_s) {
      for (int i = 0; i < 10000; ++i) x = x * 1.0000001 + 1e-9;
    }
    const double wait_called_s = Communicator::now_s();
    const LaunchTimes times = comm.wait(handle);
    EXPECT_LT(times.completed_s, wait_called_s) << "64 MB needed " << times.completed_s - times.launched_s
                                                << " s; the progress thread did not finish it during compute";
    EXPECT_EQ(in[kBytes - 1], static_cast<char>(partner + 1));
    EXPECT_GT(x, 0.0);
    if (comm.rank() == 0) {
      std::fprintf(stderr, "[rank 0] 64 MB exchange with progress thread: %.3f s after launch\n",
                   times.completed_s - times.launched_s);
    }
  });
}

TEST(MpiCheck, ErrorNamesFileCallAndMpiText) {
  on_all_ranks([&] {
    char byte = 0;
    MPI_Request request = MPI_REQUEST_NULL;
    try {
      FULCRUM_MPI_CHECK(MPI_Isend(&byte, -1, MPI_BYTE, 0, 0, MPI_COMM_WORLD, &request));
      ADD_FAILURE() << "negative count accepted";
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("mpi_communicator_test.cpp:"), std::string::npos) << message;
      EXPECT_NE(message.find("MPI_Isend(&byte, -1"), std::string::npos) << message;
      EXPECT_NE(message.find("MPI_ERR_COUNT"), std::string::npos) << message;
      EXPECT_EQ(e.kind(), ErrorKind::kRuntime);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Progress, MpiComm, ::testing::Values(MpiProgress::kThread, MpiProgress::kNone),
                         [](const auto& param_info) {
                           return param_info.param == MpiProgress::kThread ? "Thread" : "None";
                         });

// Ranks other than 0 print only failures, prefixed with their rank (a full report per rank is noise).
class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: %s\n", rank_, result.file_name() ? result.file_name() : "?",
                 result.line_number(), result.summary());
  }

 private:
  int rank_;
};

// The failing job of mpi_abort_check.py: what an application's main does with an error on one rank.
int play_failing_job(int fail_rank) {
  MpiCommunicator comm(MpiProgress::kThread);
  comm.set_timeout_s(100);  // longer than the check allows: only the abort can end it in time
  try {
    if (comm.rank() == fail_rank) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the others are waiting by now
      throw Error(fmt::format("deliberate failure on rank {} (abort test)", fail_rank), ErrorKind::kRuntime);
    }
    int value = 0;
    const WireMessage receive{fail_rank, 0, &value, sizeof(value)};
    comm.wait(comm.launch({}, std::span(&receive, 1)));
    comm.barrier();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", comm.rank(), e.what());
    std::fflush(stderr);
    comm.abort(e.what());
  }
  return 0;
}

}  // namespace
}  // namespace fulcrum::runtime

int main(int argc, char** argv) {
  using namespace fulcrum::runtime;
  ::testing::InitGoogleTest(&argc, argv);
  int fail_rank = -1;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--fail-on-rank=", 15) == 0) fail_rank = std::atoi(argv[i] + 15);
  }
  try {
    MpiSession session(&argc, &argv);
    if (fail_rank >= 0) return play_failing_job(fail_rank);
    fulcrum::runtime::testing::quiet_other_ranks(
        session.world_rank(), session.world_rank() != 0 ? new FailurePrinter(session.world_rank()) : nullptr);
    MpiCommunicator verdict(MpiProgress::kNone);
    verdict.set_timeout_s(100);
    g_verdict = &verdict;
    const int status = fulcrum::runtime::testing::run_all_tests_on_every_rank(verdict);
    g_verdict = nullptr;
    return status;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
