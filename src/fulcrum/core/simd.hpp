// The vector layer of the kernels and MTraining's estimator: GCC vector extensions at each ISA's native
// width (Baseline: SSE2, 4 floats; Avx2: AVX2 + FMA, 8; Avx512: 16), each ISA's register blocking, and
// the run-time dispatch. Vector code is written once (the *-inl.hpp files) and compiled once per ISA by
// core/simd_foreach_isa.hpp, in namespaces isa_baseline, isa_avx2 and isa_avx512; FULCRUM_DISPATCH calls
// the version active_isa() names. Files with vector code are compiled with -Wno-psabi
// (src/fulcrum/CMakeLists.txt): no call between versions passes a vector by value.
#pragma once

#include "fulcrum/core/simd_path.hpp"

#include <cstdint>
#include <cstring>
#include <utility>

#define FULCRUM_INLINE [[gnu::always_inline]] inline

namespace fulcrum::simd {

/// L-float vectors, and their int32 counterparts (comparison results, exponent bits).
template <int L>
struct Lanes {
  // typedef, not using: GCC 12 drops a dependent vector_size from an alias-declaration (a 4-byte "vector").
  typedef float Vec __attribute__((vector_size(4 * L)));          // NOLINT(modernize-use-using)
  typedef std::int32_t IVec __attribute__((vector_size(4 * L)));  // NOLINT(modernize-use-using)
  static constexpr int kLanes = L;
};
static_assert(sizeof(Lanes<8>::Vec) == 32 && sizeof(Lanes<4>::IVec) == 16, "vector_size lost");
template <class V>
inline constexpr int kLanesOf = static_cast<int>(sizeof(V) / sizeof(float));

/// 16-float vectors, for code that runs outside dispatch (the estimator's exact reductions, which must
/// give the same bits on every rank whatever its CPU, and the tests).
using Vec = Lanes<16>::Vec;
using IVec = Lanes<16>::IVec;
inline constexpr int kLanes = 16;
inline constexpr float kNegInf = -__builtin_inff();

// The helpers for code outside dispatch (the estimator's exact reductions, the tests).
#include "fulcrum/core/simd_ops-inl.hpp"

// The ISAs as types: each its native vector (one xmm, ymm or zmm register) and the register block of
// accumulators its register file holds, kBlockRows rows of kBlockVecs vectors, for the tile products
// and the estimator's logit product (16 registers on SSE2 and AVX2, 32 on AVX-512). GCC lowers vectors
// wider than the ISA's registers through the stack: 16-float vectors on AVX2 ran the kernels at half the
// SSE2 version's speed (docs/decisions/0004-simd-three-isas.md). The width and the blocking change which
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

}  // namespace fulcrum::simd

/// Runs `call` (an unqualified call, e.g. `forward_item<T>(f, item, w)`) in the namespace of `isa`'s version
/// (core/simd_foreach_isa.hpp). Callers read active_isa() once per call, outside their parallel regions, so
/// one call runs one version and a bad FULCRUM_SIMD is an error at the call, not inside an OpenMP region.
// NOLINTBEGIN(bugprone-macro-parentheses): `call` follows a namespace qualifier, where no parentheses go.
#if FULCRUM_SIMD_BASELINE_ONLY
#define FULCRUM_DISPATCH(isa, call) \
  do {                              \
    static_cast<void>(isa);         \
    isa_baseline::call;             \
  } while (false)
#else
#define FULCRUM_DISPATCH(isa, call)                                    \
  do {                                                                 \
    switch (isa) {                                                     \
      case ::fulcrum::simd::Isa::kAvx512: isa_avx512::call; break;     \
      case ::fulcrum::simd::Isa::kAvx2: isa_avx2::call; break;         \
      case ::fulcrum::simd::Isa::kBaseline: isa_baseline::call; break; \
    }                                                                  \
  } while (false)
#endif
// NOLINTEND(bugprone-macro-parentheses)
