#include "fulcrum/runtime/local_communicator.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/runtime/communicator_test_cases.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

namespace fulcrum::runtime {
namespace {

using testing::run_exchange;

// Runs `body` and returns the Error's message run_local_ranks threw ("" when none); `kind` is the
// kind the Error must have (the communicator's own errors are runtime; a rank's own keep theirs).
std::string error_of(int ranks, const std::function<void(Communicator&)>& body, double timeout_s,
                     ErrorKind kind = ErrorKind::kRuntime) {
  try {
    run_local_ranks(ranks, body, timeout_s);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind);
    return e.what();
  }
  return "";
}

TEST(LocalCommunicator, RandomExchangesAmongFourRanksDeliverEveryByte) {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    const auto plan = testing::random_exchange(4, seed, 3, 1 << 14, 30000);
    std::atomic<std::size_t> wrong{0};
    run_local_ranks(
        4,
        [&](Communicator& comm) {
          const int launches = 1 + static_cast<int>(seed % 3);
          const auto result = run_exchange(comm, plan, launches, seed);
          EXPECT_EQ(result.wrong_bytes, 0u) << "seed " << seed << ": " << result.first_problem;
          for (const LaunchTimes& t : result.times) EXPECT_LE(t.launched_s, t.completed_s);
          wrong += result.wrong_bytes;
        },
        10);
    EXPECT_EQ(wrong.load(), 0u) << "seed " << seed;
  }
}

TEST(LocalCommunicator, RingAndAllToAllDeliverEveryByte) {
  for (const auto& plan : {testing::ring_exchange(4, 100000), testing::all_to_all_exchange(4, 4096)}) {
    run_local_ranks(
        4,
        [&](Communicator& comm) {
          const auto result = run_exchange(comm, plan, 1, 7);
          EXPECT_EQ(result.wrong_bytes, 0u) << result.first_problem;
        },
        10);
  }
}

TEST(LocalCommunicator, ReceivesMatchByTagWhateverTheOrder) {
  run_local_ranks(
      2,
      [](Communicator& comm) {
        if (comm.rank() == 0) {
          int values[3] = {10, 20, 30};
          std::vector<WireMessage> sends;
          for (int i = 0; i < 3; ++i) sends.push_back({1, i + 1, &values[i], sizeof(int)});
          comm.wait(comm.launch(sends, {}));
        } else {
          // Receives posted in the opposite order, in separate launches, waited in yet another order.
          int got[3] = {0, 0, 0};
          std::vector<int> handles;
          for (int tag = 3; tag >= 1; --tag) {
            const WireMessage receive{0, tag, &got[tag - 1], sizeof(int)};
            handles.push_back(comm.launch({}, std::span(&receive, 1)));
          }
          comm.wait(handles[1]);
          comm.wait(handles[0]);
          comm.wait(handles[2]);
          EXPECT_EQ(got[0], 10);
          EXPECT_EQ(got[1], 20);
          EXPECT_EQ(got[2], 30);
        }
      },
      10);
}

TEST(LocalCommunicator, SameTagMessagesArriveInOrder) {
  run_local_ranks(
      2,
      [](Communicator& comm) {
        int values[4] = {1, 2, 3, 4};
        std::vector<WireMessage> messages;
        for (int& v : values) messages.push_back({1 - comm.rank(), 5, &v, sizeof(int)});
        if (comm.rank() == 0) {
          comm.wait(comm.launch(messages, {}));
        } else {
          std::memset(values, 0, sizeof(values));
          comm.wait(comm.launch({}, messages));
          EXPECT_EQ(values[0], 1);
          EXPECT_EQ(values[3], 4);
        }
      },
      10);
}

TEST(LocalCommunicator, ByteCountMismatchNamesBothRanksTagAndSizes) {
  const std::string message = error_of(
      2,
      [](Communicator& comm) {
        char buffer[16] = {};
        const WireMessage m{1 - comm.rank(), 5, buffer, comm.rank() == 0 ? 8u : 16u};
        if (comm.rank() == 0) comm.wait(comm.launch(std::span(&m, 1), {}));
        if (comm.rank() == 1) comm.wait(comm.launch({}, std::span(&m, 1)));
      },
      10);
  EXPECT_NE(message.find("byte count mismatch for tag 5: rank 0 sends 8 bytes to rank 1, which receives 16 bytes"),
            std::string::npos)
      << message;
}

TEST(LocalCommunicator, ThrowingRankIsReportedAndWakesTheOthers) {
  const auto start = std::chrono::steady_clock::now();
  const std::string message = error_of(
      4,
      [](Communicator& comm) {
        if (comm.rank() == 2) {
          std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let the others block first
          throw Error("boom at step 3", ErrorKind::kBadInput);
        }
        int value = 0;
        const WireMessage receive{2, 0, &value, sizeof(value)};
        comm.wait(comm.launch({}, std::span(&receive, 1)));  // rank 2 never sends
      },
      30, ErrorKind::kBadInput);
  const double elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(message, "rank 2: boom at step 3");
  EXPECT_LT(elapsed_s, 5.0) << "the waiting ranks were not woken by the abort";
}

TEST(LocalCommunicator, MissingSenderTimesOutNamingThePeer) {
  const auto start = std::chrono::steady_clock::now();
  const std::string message = error_of(
      2,
      [](Communicator& comm) {
        if (comm.rank() == 0) return;  // never sends
        int value = 0;
        const WireMessage receive{0, 7, &value, sizeof(value)};
        comm.wait(comm.launch({}, std::span(&receive, 1)));
      },
      0.5);
  const double elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(message,
            "rank 1: timed out after 0.5 s waiting for launch 0 (1 of 1 messages incomplete: receive from rank 0 "
            "tag 7)");
  EXPECT_GE(elapsed_s, 0.5);
  EXPECT_LT(elapsed_s, 5.0);
}

// A timed-out wait throws and its caller frees the receive buffer: a message sent after must not be copied
// there (it was: the receive stayed queued), but wait for the next receive of its tag.
TEST(LocalCommunicator, MessageAfterATimeoutLandsInTheNextReceiveNotTheFreedBuffer) {
  std::atomic<bool> timed_out{false};
  run_local_ranks(
      2,
      [&](Communicator& comm) {
        std::vector<int> data(1000);
        const std::size_t bytes = data.size() * sizeof(int);
        if (comm.rank() == 0) {
          while (!timed_out) std::this_thread::sleep_for(std::chrono::milliseconds(10));
          for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<int>(i);
          const WireMessage send{1, 7, data.data(), bytes};
          comm.wait(comm.launch(std::span(&send, 1), {}));
          return;
        }
        comm.set_timeout_s(0.2);
        {
          std::vector<int> freed(data.size(), -1);
          const WireMessage receive{0, 7, freed.data(), bytes};
          EXPECT_THROW(comm.wait(comm.launch({}, std::span(&receive, 1))), Error);
        }
        timed_out = true;
        comm.set_timeout_s(30);
        const WireMessage receive{0, 7, data.data(), bytes};
        comm.wait(comm.launch({}, std::span(&receive, 1)));
        for (std::size_t i = 0; i < data.size(); ++i) ASSERT_EQ(data[i], static_cast<int>(i)) << "int " << i;
      },
      30);
}

TEST(LocalCommunicator, AbortWakesWaitersWithTheMessage) {
  const std::string message = error_of(
      3,
      [](Communicator& comm) {
        if (comm.rank() == 0) {
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
          comm.abort("operator pulled the plug");
          return;
        }
        comm.barrier();  // rank 0 never arrives
      },
      30);
  EXPECT_NE(message.find("job aborted: operator pulled the plug"), std::string::npos) << message;
}

TEST(LocalCommunicator, AllGatherConcatenatesInRankOrderEveryRound) {
  run_local_ranks(
      4,
      [](Communicator& comm) {
        for (int round = 0; round < 50; ++round) {
          if ((round + comm.rank()) % 3 == 0) std::this_thread::yield();
          const double mine[2] = {comm.rank() * 1.0, round * 100.0 + comm.rank()};
          const std::vector<double> all = comm.all_gather(mine);
          ASSERT_EQ(all.size(), 8u);
          for (int r = 0; r < 4; ++r) {
            EXPECT_EQ(all[static_cast<std::size_t>(2 * r)], r);
            EXPECT_EQ(all[static_cast<std::size_t>(2 * r + 1)], round * 100.0 + r);
          }
        }
      },
      10);
}

TEST(LocalCommunicator, BarrierHoldsEveryRankUntilAllArrive) {
  std::atomic<int> arrived{0};
  run_local_ranks(
      4,
      [&](Communicator& comm) {
        for (int round = 1; round <= 20; ++round) {
          if (comm.rank() == round % 4) std::this_thread::sleep_for(std::chrono::milliseconds(1));
          ++arrived;
          comm.barrier();
          EXPECT_GE(arrived.load(), 4 * round);
          comm.barrier();  // nobody starts the next round's increments before everyone checked
        }
      },
      10);
}

TEST(LocalCommunicator, BarrierTimeoutNamesTheMissingRank) {
  const std::string message = error_of(
      3,
      [](Communicator& comm) {
        if (comm.rank() != 1) comm.barrier();
      },
      0.3);
  EXPECT_NE(message.find("timed out after 0.3 s in barrier (2 of 3 ranks arrived; missing ranks 1)"), std::string::npos)
      << message;
}

TEST(LocalCommunicator, BadPeerAndTagAreRejectedBeforeAnythingIsPosted) {
  LocalHub hub(2);
  LocalCommunicator comm(hub, 0);
  int value = 0;
  const WireMessage bad_peer{2, 0, &value, sizeof(value)};
  const WireMessage bad_tag{1, -1, &value, sizeof(value)};
  EXPECT_THROW(comm.launch(std::span(&bad_peer, 1), {}), Error);
  EXPECT_THROW(comm.launch({}, std::span(&bad_tag, 1)), Error);
  EXPECT_THROW(LocalCommunicator(hub, 2), Error);
  EXPECT_THROW(LocalHub(0), Error);
  const LaunchTimes empty = comm.wait(comm.launch({}, {}));
  EXPECT_EQ(empty.launched_s, empty.completed_s);
}

TEST(Communicator, NowIsMonotonicSeconds) {
  const double a = Communicator::now_s();
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const double b = Communicator::now_s();
  EXPECT_GE(b - a, 0.009);
  EXPECT_LT(b - a, 1.0);
}

}  // namespace
}  // namespace fulcrum::runtime
