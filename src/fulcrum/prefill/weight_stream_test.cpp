#include "fulcrum/prefill/weight_stream.hpp"

#include "fulcrum/core/error.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace fulcrum::prefill {
namespace {

// A loader that tags each part's buffer with its number and records how far ahead it got.
struct TaggingLoader {
  std::atomic<int> loaded{0};
  int fail_at = -1;
  void operator()(int part, WeightPart& into) {
    if (part == fail_at) fail_runtime("weights.bin: reading part {} failed", part);
    into.attention.layer = part;
    into.mlp.norm.assign(3, static_cast<float>(part));
    loaded = part + 1;
  }
};

TEST(WeightStream, PartsArriveInOrderAndTheReaderStaysAtMostOnePartAhead) {
  for (bool background : {false, true}) {
    TaggingLoader loader;
    WeightStream stream(
        6, [&](int p, WeightPart& w) { loader(p, w); }, background);
    for (int p = 0; p < 6; ++p) {
      double waited = -1;
      const WeightPart& part = stream.acquire(p, waited);
      EXPECT_EQ(part.attention.layer, p);
      EXPECT_EQ(part.mlp.norm, std::vector<float>(3, static_cast<float>(p)));
      EXPECT_GE(waited, 0);
      // Two buffers: while p is held the reader may have read p + 1, never p + 2.
      std::this_thread::sleep_for(std::chrono::milliseconds(background ? 5 : 0));
      EXPECT_LE(loader.loaded.load(), p + 2);
      stream.release(p);
    }
  }
}

TEST(WeightStream, AReadErrorReachesTheComputeThreadAndNothingHangs) {
  for (bool background : {false, true}) {
    TaggingLoader loader;
    loader.fail_at = 3;
    WeightStream stream(
        6, [&](int p, WeightPart& w) { loader(p, w); }, background);
    double waited = 0;
    for (int p = 0; p < 3; ++p) {
      stream.acquire(p, waited);
      stream.release(p);
    }
    try {
      stream.acquire(3, waited);
      FAIL() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("reading part 3 failed"), std::string::npos);
    }
  }
}

TEST(WeightStream, DestroyingItWhileTheReaderWaitsForABufferReturns) {
  TaggingLoader loader;
  {
    WeightStream stream(
        10, [&](int p, WeightPart& w) { loader(p, w); }, true);
    double waited = 0;
    stream.acquire(0, waited);  // held, never released: the reader fills the other buffer and waits
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_LE(loader.loaded.load(), 2);
}

TEST(WeightStream, OutOfOrderUseIsAnInternalError) {
  TaggingLoader loader;
  WeightStream stream(
      4, [&](int p, WeightPart& w) { loader(p, w); }, true);
  double waited = 0;
  EXPECT_THROW(stream.acquire(1, waited), Error);
  stream.acquire(0, waited);
  EXPECT_THROW(stream.release(1), Error);
}

}  // namespace
}  // namespace fulcrum::prefill
