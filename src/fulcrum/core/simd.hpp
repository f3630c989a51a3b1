// A 16-float vector layer with GCC vector extensions (one AVX-512 register), shared by the attention
// kernels (kernels/simd.hpp adds their tiles and products) and MTraining's estimator. Everything is
// always_inline, so each caller compiles it for its own ISA: zmm registers and FMAs where the caller
// is built for AVX-512, the same code split into narrower registers elsewhere. Files that use it are
// compiled with -Wno-psabi (src/fulcrum/CMakeLists.txt): no call ever passes a vector by value.
#pragma once

#include <cstdint>
#include <cstring>

#define FULCRUM_INLINE [[gnu::always_inline]] inline

#if defined(__clang__)
// Clang 14 (CI's) rejects target_clones on function templates; the Clang builds (CI's clang, tsan and fuzz
// presets) check correctness, not speed, so they compile the portable code only.
#define FULCRUM_SIMD_CLONES
#else
// One build carries two versions of each hot entry point and the loader picks one (an ifunc resolver reading
// CPUID): AVX-512 where the CPU has it (each 16-float vector one zmm register), the x86-64 baseline (SSE2)
// elsewhere. No AVX2 version: GCC has no 64-byte vector mode without AVX-512 and lowers these vectors
// through the stack, which ran the kernels at half the SSE2 clone's speed on an AVX2 (Zen 3) machine
// (measured with an x86-64-v3 clone, docs/performance.md); an AVX2 path needs 8-float vectors of its own.
#define FULCRUM_SIMD_CLONES __attribute__((target_clones("avx512f", "default")))
#endif

namespace fulcrum::simd {

using Vec = float __attribute__((vector_size(64)));
using IVec = std::int32_t __attribute__((vector_size(64)));
inline constexpr int kLanes = 16;
inline constexpr float kNegInf = -__builtin_inff();

FULCRUM_INLINE Vec load(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
FULCRUM_INLINE void store(float* p, Vec v) { std::memcpy(p, &v, sizeof v); }
// Spelled out: `Vec{} + x` would make the compiler add 0.0f first (x + 0 is not x for x = -0.0f).
FULCRUM_INLINE Vec splat(float x) { return Vec{x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x}; }
FULCRUM_INLINE Vec max(Vec a, Vec b) { return a > b ? a : b; }

/// 2^x for x <= 127 (x = -inf gives 0). Round-to-nearest split x = n + f with |f| <= 1/2 and a
/// degree-6 Taylor polynomial for 2^f: relative error ~1e-7, about fp32's own rounding.
FULCRUM_INLINE Vec exp2_bounded(Vec x) {
  x = x > splat(-127.0f) ? x : splat(-127.0f);
  const Vec y = x + splat(0.5f);  // n = floor(y) = round(x), by truncation
  IVec n = __builtin_convertvector(y, IVec);
  const IVec above = __builtin_convertvector(n, Vec) > y;  // truncated towards zero: one step down
  n += above;                                              // (true is -1)
  const Vec f = x - __builtin_convertvector(n, Vec);
  // Coefficients ln(2)^k / k!.
  Vec p = splat(1.5403530e-4f);
  p = p * f + splat(1.3333558e-3f);
  p = p * f + splat(9.6181291e-3f);
  p = p * f + splat(5.5504109e-2f);
  p = p * f + splat(2.4022651e-1f);
  p = p * f + splat(6.9314718e-1f);
  p = p * f + splat(1.0f);
  // n in [-127, 0]: 2^n from the exponent bits; n = -127 gives the bit pattern of 0.0f.
  const IVec bits = (n + 127) << 23;
  Vec scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

}  // namespace fulcrum::simd
