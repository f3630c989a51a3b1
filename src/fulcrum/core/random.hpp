// Seeded, platform-independent random numbers. std::*_distribution differ between standard libraries,
// so Fulcrum draws through these small functions to keep "same seed, same plan" true everywhere.
#pragma once

#include <cstdint>
#include <vector>

namespace fulcrum {

/// SplitMix64's step as a hash: bijective, so distinct inputs give distinct, independent-looking outputs.
/// For values that are a function of coordinates (generated tensors, contribution ids).
std::uint64_t mix64(std::uint64_t value);

/// xoshiro256** seeded by splitmix64: fast, good statistical quality, identical on every platform.
class Rng {
 public:
  explicit Rng(std::uint64_t seed);

  std::uint64_t next_u64();
  /// Uniform double in [0, 1).
  double uniform();
  /// Uniform integer in [lo, hi] (inclusive); lo <= hi.
  std::int64_t uniform_int(std::int64_t lo, std::int64_t hi);
  /// Standard normal (Box-Muller; one of the pair is kept for the next call).
  double normal();
  /// Fisher-Yates shuffle.
  template <typename T>
  void shuffle(std::vector<T>& values) {
    for (std::size_t i = values.size(); i > 1; --i) {
      auto j = static_cast<std::size_t>(uniform_int(0, static_cast<std::int64_t>(i - 1)));
      std::swap(values[i - 1], values[j]);
    }
  }

 private:
  std::uint64_t state_[4];
  bool has_spare_normal_ = false;
  double spare_normal_ = 0.0;
};

}  // namespace fulcrum
