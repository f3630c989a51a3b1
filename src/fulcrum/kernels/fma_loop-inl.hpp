// The FMA-peak loop (no include guard): compiled once per ISA by timing.cpp, inside its isa_* namespaces
// (core/simd_foreach_isa.hpp), so the peak is the one of the version the kernels run.
#include "fulcrum/core/simd_ops-inl.hpp"

// 12 independent accumulator registers: enough to cover the FMA latency (4 cycles) on two FMA ports.
constexpr int kFmaVecs = 12;

/// The loop in this ISA's version (FULCRUM_DISPATCH calls it): its result and its FLOPs.
void fma_loop(long iterations, float seed, float& sum, double& flops) {
  using Vec = Isa::Vec;
  Vec acc[kFmaVecs];
  for (int i = 0; i < kFmaVecs; ++i) acc[i] = splat<Vec>(seed + static_cast<float>(i));
  const Vec a = splat<Vec>(0.999999f), b = splat<Vec>(1e-7f);
  for (long it = 0; it < iterations; ++it) {
#pragma GCC unroll 12
    for (Vec& v : acc) v = v * a + b;
  }
  sum = 0;
  for (const Vec& v : acc) sum += v[0];
  flops = 2.0 * Isa::kLanes * kFmaVecs * static_cast<double>(iterations);
}
