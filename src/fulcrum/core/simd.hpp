// A 16-float vector layer with GCC vector extensions (one AVX-512 register), shared by the attention
// kernels (kernels/simd.hpp adds their tiles and products) and MTraining's estimator, and the run-time
// dispatch that compiles each hot entry point once per ISA. Everything is always_inline, so each entry
// point compiles it for its own ISA: zmm registers and FMAs on AVX-512, the same code split into ymm
// halves (AVX2 + FMA) or xmm quarters (SSE2) elsewhere. Files that use it are compiled with -Wno-psabi
// (src/fulcrum/CMakeLists.txt): no call ever passes a vector by value.
#pragma once

#include "fulcrum/core/simd_path.hpp"

#include <cstdint>
#include <cstring>
#include <utility>

#define FULCRUM_INLINE [[gnu::always_inline]] inline
// The same for a lambda, after its parameter list.
#define FULCRUM_LAMBDA_INLINE __attribute__((always_inline))

namespace fulcrum::simd {

/// L-float vectors, and their int32 counterparts (comparison results, exponent bits).
template <int L>
struct Lanes {
  typedef float Vec __attribute__((vector_size(4 * L)));
  typedef std::int32_t IVec __attribute__((vector_size(4 * L)));
  static constexpr int kLanes = L;
};
template <class V>
inline constexpr int kLanesOf = static_cast<int>(sizeof(V) / sizeof(float));

/// 16-float vectors, for code that runs outside dispatch (the estimator's exact reductions, which must
/// give the same bits on every rank whatever its CPU, and the tests).
using Vec = Lanes<16>::Vec;
using IVec = Lanes<16>::IVec;
inline constexpr int kLanes = 16;
inline constexpr float kNegInf = -__builtin_inff();

template <class V>
FULCRUM_INLINE V load(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class V>
FULCRUM_INLINE void store(float* p, V v) {
  std::memcpy(p, &v, sizeof v);
}
// x - (+0) is x for every x, -0 included (x + 0 would not be).
template <class V>
FULCRUM_INLINE V splat(float x) {
  return x - V{};
}
template <class V>
FULCRUM_INLINE V max(V a, V b) {
  return a > b ? a : b;
}

/// 2^x for x <= 127 (x = -inf gives 0). Round-to-nearest split x = n + f with |f| <= 1/2 and a
/// degree-6 Taylor polynomial for 2^f: relative error ~1e-7, about fp32's own rounding.
template <class V>
FULCRUM_INLINE V exp2_bounded(V x) {
  using I = typename Lanes<kLanesOf<V>>::IVec;
  x = x > splat<V>(-127.0f) ? x : splat<V>(-127.0f);
  const V y = x + splat<V>(0.5f);  // n = floor(y) = round(x), by truncation
  I n = __builtin_convertvector(y, I);
  const I above = __builtin_convertvector(n, V) > y;  // truncated towards zero: one step down
  n += above;                                         // (true is -1)
  const V f = x - __builtin_convertvector(n, V);
  // Coefficients ln(2)^k / k!.
  V p = splat<V>(1.5403530e-4f);
  p = p * f + splat<V>(1.3333558e-3f);
  p = p * f + splat<V>(9.6181291e-3f);
  p = p * f + splat<V>(5.5504109e-2f);
  p = p * f + splat<V>(2.4022651e-1f);
  p = p * f + splat<V>(6.9314718e-1f);
  p = p * f + splat<V>(1.0f);
  // n in [-127, 0]: 2^n from the exponent bits; n = -127 gives the bit pattern of 0.0f.
  const I bits = (n + 127) << 23;
  V scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

// The ISAs as types: each its native vector (one xmm, ymm or zmm register) and the register block of
// accumulators its register file holds, kBlockRows rows of kBlockVecs vectors, for the tile products
// and the estimator's logit product (16 registers on SSE2 and AVX2, 32 on AVX-512). GCC lowers vectors
// wider than the ISA's registers through the stack: 16-float vectors everywhere ran the AVX2 version at
// a seventh of the ISA's FMA peak (docs/performance.md). The width and the blocking change which
// products run together, not any sum's order; the versions' results differ only where AVX2 and AVX-512
// fuse a multiply and an add that SSE2 rounds apart.
struct Baseline : Lanes<4> {
  static constexpr Isa kIsa = Isa::kBaseline;
  static constexpr int kBlockRows = 6, kBlockVecs = 2;  // 12 accumulators, 2 for B, 1 broadcast
};
struct Avx2 : Lanes<8> {
  static constexpr Isa kIsa = Isa::kAvx2;
  static constexpr int kBlockRows = 6, kBlockVecs = 2;
};
struct Avx512 : Lanes<16> {
  static constexpr Isa kIsa = Isa::kAvx512;
  static constexpr int kBlockRows = 6, kBlockVecs = 4;  // 24 accumulators, 4 for B, 1 broadcast
};

// One version of Body::run per ISA, each compiled for it (Body::run is always_inline, so its whole body
// lands in these functions), and dispatch() runs the one for `isa`: a predictable branch per work item.
// Callers read active_isa() once per call, outside their parallel regions, so that one call runs one
// version and a bad FULCRUM_SIMD is an error at the call, not an exception inside an OpenMP region.
// Hand-written rather than GCC's target_clones, whose clones share one body and so cannot change the
// vector width or the blocking (and which Clang 14 rejects on templates); Highway would wrap the same idea
// in its own vector types, and the kernels are written in GCC's.
template <class Body, class... Args>
[[gnu::target("avx512f")]] void run_avx512(Args&&... args) {
  Body::template run<Avx512>(std::forward<Args>(args)...);
}
template <class Body, class... Args>
[[gnu::target("avx2,fma")]] void run_avx2(Args&&... args) {
  Body::template run<Avx2>(std::forward<Args>(args)...);
}
template <class Body, class... Args>
void run_baseline(Args&&... args) {
  Body::template run<Baseline>(std::forward<Args>(args)...);
}
template <class Body, class... Args>
FULCRUM_INLINE void dispatch(Isa isa, Args&&... args) {
  switch (isa) {
    case Isa::kAvx512: return run_avx512<Body>(std::forward<Args>(args)...);
    case Isa::kAvx2: return run_avx2<Body>(std::forward<Args>(args)...);
    case Isa::kBaseline: break;
  }
  run_baseline<Body>(std::forward<Args>(args)...);
}

}  // namespace fulcrum::simd
