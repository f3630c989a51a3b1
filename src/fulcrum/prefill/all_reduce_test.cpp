#include "fulcrum/prefill/all_reduce.hpp"

#include "fulcrum/runtime/local_communicator.hpp"

#include <gtest/gtest.h>

#include <mutex>
#include <vector>

namespace fulcrum::prefill {
namespace {

// Rank r's value of element i: small integers, so every order of summation gives the exact sum.
float value(int rank, std::size_t i) { return static_cast<float>((rank + 1) * 3 + static_cast<int>(i % 7)); }

TEST(AllReduce, EveryRankGetsTheExactSumForAnyRankCountAndSize) {
  for (int ranks = 1; ranks <= 5; ++ranks) {
    for (std::size_t size : {std::size_t{1}, std::size_t{3}, std::size_t{64}, std::size_t{1001}}) {
      std::vector<std::vector<float>> results(static_cast<std::size_t>(ranks));
      std::mutex mutex;
      runtime::run_local_ranks(ranks, [&](runtime::Communicator& comm) {
        std::vector<float> data(size);
        for (std::size_t i = 0; i < size; ++i) data[i] = value(comm.rank(), i);
        all_reduce_sum(comm, data);
        all_reduce_sum(comm, data);  // twice: tags are reused by consecutive calls
        const std::lock_guard lock(mutex);
        results[static_cast<std::size_t>(comm.rank())] = data;
      });
      for (std::size_t i = 0; i < size; ++i) {
        float want = 0;
        for (int r = 0; r < ranks; ++r) want += value(r, i);
        want *= static_cast<float>(ranks);
        for (int r = 0; r < ranks; ++r) {
          ASSERT_EQ(results[static_cast<std::size_t>(r)][i], want) << ranks << " ranks, size " << size << ", i " << i;
        }
      }
    }
  }
}

TEST(AllReduce, RanksEndBitwiseIdenticalOnInexactSums) {
  constexpr int kRanks = 3;
  std::vector<std::vector<float>> results(kRanks);
  std::mutex mutex;
  runtime::run_local_ranks(kRanks, [&](runtime::Communicator& comm) {
    std::vector<float> data(100);
    for (std::size_t i = 0; i < data.size(); ++i)
      data[i] = 0.1F * static_cast<float>(i) / static_cast<float>(comm.rank() + 3);
    all_reduce_sum(comm, data);
    const std::lock_guard lock(mutex);
    results[static_cast<std::size_t>(comm.rank())] = data;
  });
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
}

}  // namespace
}  // namespace fulcrum::prefill
