// The kernels' vector layer, written once with GCC vector extensions on core/simd.hpp's 16-float
// vectors (one AVX-512 register). Everything here is always_inline, so each kernel entry point that
// simd::dispatch runs compiles it for its own ISA, with that ISA's register block (core/simd.hpp):
// zmm registers and FMAs on AVX-512, the same code split into ymm halves on AVX2 and xmm quarters on SSE2. Hand-written
// (not a BLAS call) because the attention tiles are small, fused with the online softmax, and read operands at strides
// no BLAS takes.
#pragma once

#include "fulcrum/core/simd.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <vector>

namespace fulcrum::kernels::simd {

// The element-wise helpers and the ISA dispatch live in core (the estimator uses them too). The vector
// types come from each function's Isa parameter (Isa::Vec, Isa::kLanes): nothing here has a width of its own.
using fulcrum::simd::dispatch;
using fulcrum::simd::exp2_bounded;
using fulcrum::simd::kNegInf;
using fulcrum::simd::load;
using fulcrum::simd::max;
using fulcrum::simd::splat;
using fulcrum::simd::store;
/// Every tile is 64 queries or 64 keys wide.
inline constexpr int kTile = 64;
/// Vectors per tile row.
template <class Isa>
inline constexpr int kTileVecs = kTile / Isa::kLanes;
/// Floats per cache line, the step of a Prefetch.
inline constexpr int kLineFloats = 16;

/// Scratch whose rows start on cache lines: a 64-byte vector load that straddles two lines runs at
/// half speed, which cost the tile products 10-40% with malloc's 16-byte alignment (measured).
template <class T>
struct CacheLineAllocator {
  using value_type = T;
  CacheLineAllocator() = default;
  template <class U>
  CacheLineAllocator(const CacheLineAllocator<U>&) {}  // NOLINT: rebinding
  T* allocate(std::size_t n) { return static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{64})); }
  void deallocate(T* p, std::size_t) { ::operator delete (p, std::align_val_t{64}); }
  friend bool operator==(const CacheLineAllocator&, const CacheLineAllocator&) { return true; }
};
using Floats = std::vector<float, CacheLineAllocator<float>>;

/// Rows to bring into cache while a product runs, one 64-byte line per step of its inner loop. Under a
/// sparse mask the next tile's K/V (or Q/dO) rows lie far from the current ones and no hardware
/// prefetcher sees them coming; requesting all of a tile's 512 lines at once stalled on the line-fill
/// buffers (~11% of a sparse forward pass, measured), spread over the product they arrive in its shadow.
struct Prefetch {
  const float* next = nullptr;
  const float* end = nullptr;
  /// `rows` rows of ld floats from p.
  static Prefetch rows(const float* p, long rows, long ld) { return {p, p + rows * ld}; }
};

/// C[r][0..NV lanes) (+)= sum_k A(r, k) * B[k][0..NV lanes) for r < MR, NV = Isa::kBlockVecs, where
/// A(r, k) = a[r * a_row + k * a_k], B rows are ldb floats apart and C rows ldc: MR x NV accumulators held
/// in registers, NV vector loads and MR broadcasts per MR * NV FMAs.
template <class Isa, int MR>
FULCRUM_INLINE void gemm_block(float* c, long ldc, const float* a, long a_row, long a_k, const float* b, long ldb,
                               long depth, bool accumulate, Prefetch& prefetch) {
  using Vec = typename Isa::Vec;
  constexpr int NV = Isa::kBlockVecs, kLanes = Isa::kLanes;
  const float* line = prefetch.next;
  Vec acc[MR][NV];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[r][v] = accumulate ? load<Vec>(c + r * ldc + v * kLanes) : Vec{};
  }
  for (long k = 0; k < depth; ++k) {
    if (line < prefetch.end) __builtin_prefetch(line, 0, 3), line += kLineFloats;
    const float* bk = b + k * ldb;
    Vec bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = load<Vec>(bk + v * kLanes);
    const float* ak = a + k * a_k;
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const Vec s = splat<Vec>(ak[r * a_row]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] += s * bv[v];
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) store(c + r * ldc + v * kLanes, acc[r][v]);
  }
  prefetch.next = line;
}

/// The operands of one tile product C (+)= A B: C is rows x 64 (row stride ldc), A(r, k) as above,
/// B is depth x 64 (row stride ldb). `prefetch` (optional) advances as the product runs.
struct Product {
  float* c;
  long ldc;
  const float* a;
  long a_row, a_k;
  const float* b;
  long ldb;
  long depth, rows;
  Prefetch* prefetch = nullptr;
};

/// The last p.rows - r < R rows of a strip, as one block of exactly that many.
template <class Isa, int R>
FULCRUM_INLINE void gemm_rest(const Product& p, bool accumulate, long r, Prefetch& pf) {
  if constexpr (R > 0) {
    if (p.rows - r < R) return gemm_rest<Isa, R - 1>(p, accumulate, r, pf);
    gemm_block<Isa, R>(p.c + r * p.ldc, p.ldc, p.a + r * p.a_row, p.a_row, p.a_k, p.b, p.ldb, p.depth, accumulate, pf);
  }
}

/// One strip of Isa::kBlockVecs vectors of C's columns (p's C and B offset to it), all rows: blocks of
/// Isa::kBlockRows rows, then one smaller block for the remainder.
template <class Isa>
FULCRUM_INLINE void gemm_strip(const Product& p, bool accumulate, Prefetch& pf) {
  constexpr int MR = Isa::kBlockRows;
  long r = 0;
  for (; r + MR <= p.rows; r += MR)
    gemm_block<Isa, MR>(p.c + r * p.ldc, p.ldc, p.a + r * p.a_row, p.a_row, p.a_k, p.b, p.ldb, p.depth, accumulate, pf);
  gemm_rest<Isa, MR - 1>(p, accumulate, r, pf);
}

/// C (rows x 64) (+)= A B, in strips of Isa::kBlockVecs vectors.
template <class Isa>
FULCRUM_INLINE void gemm(const Product& p, bool accumulate) {
  Prefetch none;
  Prefetch& pf = p.prefetch != nullptr ? *p.prefetch : none;
  constexpr int kStrip = Isa::kBlockVecs * Isa::kLanes;  // columns
  Product strip = p;
  for (int col = 0; col < kTile; col += kStrip, strip.c += kStrip, strip.b += kStrip)
    gemm_strip<Isa>(strip, accumulate, pf);
}

/// C (rows x width, width a multiple of 64) (+)= A B, in 64-column strips of C and B.
template <class Isa>
FULCRUM_INLINE void gemm_wide(Product p, long width, bool accumulate) {
  for (long col = 0; col < width; col += kTile, p.c += kTile, p.b += kTile) gemm<Isa>(p, accumulate);
}

}  // namespace fulcrum::kernels::simd
