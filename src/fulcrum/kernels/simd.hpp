// The kernels' tiles: their size, scratch, prefetching and the operands of a tile product. The vector
// code that uses them (the products, transposes and masks) is kernels/vectors-inl.hpp, compiled per ISA.
#pragma once

#include "fulcrum/core/simd.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <vector>

namespace fulcrum::kernels::simd {

using fulcrum::simd::kNegInf;
/// Every tile is 64 queries or 64 keys wide.
inline constexpr int kTile = 64;
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

}  // namespace fulcrum::kernels::simd
