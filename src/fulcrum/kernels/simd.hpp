// The kernels' vector layer, written once with GCC vector extensions: 16 floats per vector (one
// AVX-512 register). Everything here is always_inline, so each target_clones entry point in the
// kernels compiles it for its own ISA: zmm registers and FMAs on AVX-512, the same code split into
// narrower registers on the portable clone. Hand-written (not a BLAS call) because the attention
// tiles are small, fused with the online softmax, and read operands at strides no BLAS takes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <vector>

#define FULCRUM_INLINE [[gnu::always_inline]] inline
#if defined(__clang__)
// Clang 14 (CI's) rejects target_clones on function templates; the Clang builds (CI's clang and tsan
// presets) check correctness, not speed, so they compile the portable code only.
#define FULCRUM_KERNEL_CLONES
#else
// Dispatch at load time (ifunc): the AVX-512 clone where the CPU has it, the portable one elsewhere.
#define FULCRUM_KERNEL_CLONES __attribute__((target_clones("avx512f", "default")))
#endif

namespace fulcrum::kernels::simd {

using Vec = float __attribute__((vector_size(64)));
using IVec = std::int32_t __attribute__((vector_size(64)));
inline constexpr int kLanes = 16;
/// Every tile is 64 queries or 64 keys wide: four vectors.
inline constexpr int kTile = 64;
inline constexpr int kTileVecs = kTile / kLanes;
inline constexpr float kNegInf = -__builtin_inff();

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
