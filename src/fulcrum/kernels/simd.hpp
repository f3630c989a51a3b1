// The kernels' vector layer, written once with GCC vector extensions on core/simd.hpp's 16-float
// vectors (one AVX-512 register). Everything here is always_inline, so each FULCRUM_SIMD_CLONES entry point
// in the kernels compiles it for its own ISA: zmm registers and FMAs on AVX-512, the same code split into
// ymm halves on AVX2 and into xmm quarters on the portable clone. Hand-written (not a BLAS call) because the
// attention tiles are small, fused with the online softmax, and read operands at strides no BLAS takes.
#pragma once

#include "fulcrum/core/simd.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <vector>

namespace fulcrum::kernels::simd {

// The vector type and its element-wise helpers live in core (the estimator uses them too).
using fulcrum::simd::exp2_bounded;
using fulcrum::simd::IVec;
using fulcrum::simd::kLanes;
using fulcrum::simd::kNegInf;
using fulcrum::simd::load;
using fulcrum::simd::max;
using fulcrum::simd::splat;
using fulcrum::simd::store;
using fulcrum::simd::Vec;
/// Every tile is 64 queries or 64 keys wide: four vectors.
inline constexpr int kTile = 64;
inline constexpr int kTileVecs = kTile / kLanes;

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

/// C[r][0..64) (+)= sum_k A(r, k) * B[k][0..64) for r < MR, where A(r, k) = a[r * a_row + k * a_k],
/// B rows are ldb floats apart and C rows ldc. With MR = 6 that is 24 accumulators held in registers,
/// 4 vector loads and 6 broadcasts per 24 FMAs.
template <int MR>
FULCRUM_INLINE void gemm_block(float* c, long ldc, const float* a, long a_row, long a_k, const float* b, long ldb,
                               long depth, bool accumulate, Prefetch& prefetch) {
  const float* line = prefetch.next;
  Vec acc[MR][kTileVecs];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < kTileVecs; ++v) acc[r][v] = accumulate ? load(c + r * ldc + v * kLanes) : Vec{};
  }
  for (long k = 0; k < depth; ++k) {
    if (line < prefetch.end) __builtin_prefetch(line, 0, 3), line += kLanes;
    const float* bk = b + k * ldb;
    const Vec b0 = load(bk), b1 = load(bk + 16), b2 = load(bk + 32), b3 = load(bk + 48);
    const float* ak = a + k * a_k;
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const Vec s = splat(ak[r * a_row]);
      acc[r][0] += s * b0;
      acc[r][1] += s * b1;
      acc[r][2] += s * b2;
      acc[r][3] += s * b3;
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < kTileVecs; ++v) store(c + r * ldc + v * kLanes, acc[r][v]);
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

/// gemm_block over all rows of C: blocks of 6, then one smaller block for the remainder.
FULCRUM_INLINE void gemm(const Product& p, bool accumulate) {
  Prefetch none;
  Prefetch& pf = p.prefetch != nullptr ? *p.prefetch : none;
  long r = 0;
  for (; r + 6 <= p.rows; r += 6)
    gemm_block<6>(p.c + r * p.ldc, p.ldc, p.a + r * p.a_row, p.a_row, p.a_k, p.b, p.ldb, p.depth, accumulate, pf);
  float* cr = p.c + r * p.ldc;
  const float* ar = p.a + r * p.a_row;
  switch (p.rows - r) {
    case 5: gemm_block<5>(cr, p.ldc, ar, p.a_row, p.a_k, p.b, p.ldb, p.depth, accumulate, pf); break;
    case 4: gemm_block<4>(cr, p.ldc, ar, p.a_row, p.a_k, p.b, p.ldb, p.depth, accumulate, pf); break;
    case 3: gemm_block<3>(cr, p.ldc, ar, p.a_row, p.a_k, p.b, p.ldb, p.depth, accumulate, pf); break;
    case 2: gemm_block<2>(cr, p.ldc, ar, p.a_row, p.a_k, p.b, p.ldb, p.depth, accumulate, pf); break;
    case 1: gemm_block<1>(cr, p.ldc, ar, p.a_row, p.a_k, p.b, p.ldb, p.depth, accumulate, pf); break;
    default: break;
  }
}

/// C (rows x width, width a multiple of 64) (+)= A B, in 64-column strips of C and B.
FULCRUM_INLINE void gemm_wide(Product p, long width, bool accumulate) {
  for (long col = 0; col < width; col += kTile, p.c += kTile, p.b += kTile) gemm(p, accumulate);
}

}  // namespace fulcrum::kernels::simd
