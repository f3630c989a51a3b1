// The kernels' vector code below the work items (no include guard): tile products with the ISA's register
// blocking, in-register transposes, and masking. Compiled once per ISA (core/simd_foreach_isa.hpp) by the
// files that include it, inside their isa_* namespaces; `Isa` is the version's type (core/simd.hpp).
#include "fulcrum/core/simd_ops-inl.hpp"

/// Vectors per tile row.
inline constexpr int kTileVecs = kTile / Isa::kLanes;

// The tile products are hand-written, not BLAS calls: the tiles are small, fused with the online softmax,
// and read operands at strides no BLAS takes.

/// C[r][0..NV lanes) (+)= sum_k A(r, k) * B[k][0..NV lanes) for r < MR, NV = Isa::kBlockVecs, where
/// A(r, k) = a[r * a_row + k * a_k], B rows are ldb floats apart and C rows ldc: MR x NV accumulators held
/// in registers, NV vector loads and MR broadcasts per MR * NV FMAs.
template <int MR>
FULCRUM_INLINE void gemm_block(float* c, long ldc, const float* a, long a_row, long a_k, const float* b, long ldb,
                               long depth, bool accumulate, Prefetch& prefetch) {
  using Vec = Isa::Vec;
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

/// The last p.rows - r < R rows of a strip, as one block of exactly that many.
template <int R>
FULCRUM_INLINE void gemm_rest(const Product& p, bool accumulate, long r, Prefetch& pf) {
  if constexpr (R > 0) {
    if (p.rows - r < R) return gemm_rest<R - 1>(p, accumulate, r, pf);
    gemm_block<R>(p.c + r * p.ldc, p.ldc, p.a + r * p.a_row, p.a_row, p.a_k, p.b, p.ldb, p.depth, accumulate, pf);
  }
}

/// One strip of Isa::kBlockVecs vectors of C's columns (p's C and B offset to it), all rows: blocks of
/// Isa::kBlockRows rows, then one smaller block for the remainder.
FULCRUM_INLINE void gemm_strip(const Product& p, bool accumulate, Prefetch& pf) {
  constexpr int MR = Isa::kBlockRows;
  long r = 0;
  for (; r + MR <= p.rows; r += MR)
    gemm_block<MR>(p.c + r * p.ldc, p.ldc, p.a + r * p.a_row, p.a_row, p.a_k, p.b, p.ldb, p.depth, accumulate, pf);
  gemm_rest<MR - 1>(p, accumulate, r, pf);
}

/// C (rows x 64) (+)= A B, in strips of Isa::kBlockVecs vectors.
FULCRUM_INLINE void gemm(const Product& p, bool accumulate) {
  Prefetch none;
  Prefetch& pf = p.prefetch != nullptr ? *p.prefetch : none;
  constexpr int kStrip = Isa::kBlockVecs * Isa::kLanes;  // columns
  Product strip = p;
  for (int col = 0; col < kTile; col += kStrip, strip.c += kStrip, strip.b += kStrip) gemm_strip(strip, accumulate, pf);
}

/// C (rows x width, width a multiple of 64) (+)= A B, in 64-column strips of C and B.
FULCRUM_INLINE void gemm_wide(Product p, long width, bool accumulate) {
  for (long col = 0; col < width; col += kTile, p.c += kTile, p.b += kTile) gemm(p, accumulate);
}

// One stage of an L x L in-register transpose (L = a vector's lanes): rows a and b (D rows apart) swap
// their off-diagonal blocks of D lanes in every group of 2D lanes. Stages D = L/2, ..., 2, 1 transpose
// the whole block.
template <int D, class V, int... L>
FULCRUM_INLINE V swap_low(V a, V b, std::integer_sequence<int, L...>) {
  return __builtin_shufflevector(a, b, (L % (2 * D) < D ? L : int{sizeof...(L)} + L - D)...);
}
template <int D, class V, int... L>
FULCRUM_INLINE V swap_high(V a, V b, std::integer_sequence<int, L...>) {
  return __builtin_shufflevector(a, b, (L % (2 * D) < D ? L + D : int{sizeof...(L)} + L)...);
}
template <int D = Isa::kLanes / 2>
FULCRUM_INLINE void transpose(Isa::Vec* r) {
  constexpr auto lanes = std::make_integer_sequence<int, Isa::kLanes>{};
  for (int i = 0; i < Isa::kLanes; ++i) {
    if (i % (2 * D) >= D) continue;
    const Isa::Vec a = r[i], b = r[i + D];
    r[i] = swap_low<D>(a, b, lanes);
    r[i + D] = swap_high<D>(a, b, lanes);
  }
  if constexpr (D > 1) transpose<D / 2>(r);
}
template <class T>
FULCRUM_INLINE Isa::Vec load_row(const T* p) {
  using Vec = Isa::Vec;
  if constexpr (std::is_same_v<T, float>) {
    return load<Vec>(p);
  } else {
    float row[Isa::kLanes];
    for (int k = 0; k < Isa::kLanes; ++k) row[k] = to_float(p[k]);
    return load<Vec>(row);
  }
}

/// out[c][i] = scale * src[i][c], out is [dim][64] and zero past `count`. Blocks of L x L (L = the
/// vector's lanes) are transposed in registers (log2 L shuffle stages): element by element, building Q^T
/// and K^T was ~6% of a sparse call (measured), where few products share each transposed tile.
template <class T>
FULCRUM_INLINE void load_transposed(float* out, const T* src, std::ptrdiff_t stride, Tokens count, int dim,
                                    float scale) {
  using Vec = Isa::Vec;
  constexpr int kLanes = Isa::kLanes;
  if (dim % kLanes == 0) {
    const Vec s = splat<Vec>(scale);
    for (Tokens i0 = 0; i0 < simd::kTile; i0 += kLanes) {
      for (int c0 = 0; c0 < dim; c0 += kLanes) {
        Vec r[kLanes];
        for (int i = 0; i < kLanes; ++i) {
          r[i] = i0 + i < count ? load_row(src + (i0 + i) * stride + c0) * s : Vec{};
        }
        transpose(r);
        for (int c = 0; c < kLanes; ++c) store(out + (c0 + c) * simd::kTile + i0, r[c]);
      }
    }
    return;
  }
  for (int c = 0; c < dim; ++c) {
    float* row = out + c * simd::kTile;
    for (Tokens i = 0; i < count; ++i) row[i] = scale * to_float(src[i * stride + c]);
    for (Tokens i = count; i < simd::kTile; ++i) row[i] = 0.0f;
  }
}

/// Whether none of the `count` floats at p (a multiple of the lanes) is NaN or infinite: an exponent of
/// all ones. The kernels test their score tiles and output rows with it while these are in L1, instead
/// of scanning every input before the call (non_finite.hpp): that pass cost a 96%-sparse forward ~5%.
FULCRUM_INLINE bool finite(const float* p, long count) {
  using IVec = Isa::IVec;
  constexpr int kLanes = Isa::kLanes;
  const IVec exponent = IVec{} + 0x7f800000;
  IVec bad{};
  for (long c = 0; c < count; c += kLanes) {
    IVec bits;
    std::memcpy(&bits, p + c, sizeof bits);
    bad |= (bits & exponent) == exponent;
  }
  for (int l = 0; l < kLanes; ++l) {
    if (bad[l] != 0) return false;
  }
  return true;
}

/// Sets row[c] = -inf for the c < 64 whose bit of `keep` is clear, a vector at a time.
FULCRUM_INLINE void keep_columns(float* row, std::uint64_t keep) {
  using Vec = Isa::Vec;
  using IVec = Isa::IVec;
  constexpr int kLanes = Isa::kLanes;
  constexpr std::uint64_t kAll = (1ull << kLanes) - 1;
  IVec lane_bit;
  for (int l = 0; l < kLanes; ++l) lane_bit[l] = 1 << l;
  for (int v = 0; v < kTileVecs; ++v) {
    const auto bits = static_cast<std::int32_t>((keep >> (v * kLanes)) & kAll);
    if (bits == static_cast<std::int32_t>(kAll)) continue;
    const IVec kept = ((IVec{} + bits) & lane_bit) != 0;
    store(row + v * kLanes, kept ? load<Vec>(row + v * kLanes) : splat<Vec>(kNegInf));
  }
}

/// Sets the scores of the keys that bit word `row_bits(i)` of query i leaves clear to -inf.
/// `transposed`: scores are [key][query] (else [query][key]), ld 64; nk keys computed. Vector selects
/// over whole rows (a transposed tile's bits are transposed first): setting masked scores one by one
/// was ~5% of a sparse forward pass (measured), where a third of the tiles are partial.
template <class RowBits>
FULCRUM_INLINE void mask_rows(float* s, bool transposed, Tokens nq, int nk, RowBits&& row_bits) {
  std::uint64_t bits[simd::kTile];
  std::uint64_t all = ~0ull;
  for (Tokens i = 0; i < simd::kTile; ++i) all &= bits[i] = i < nq ? row_bits(i) : ~0ull;
  if (all == ~0ull) return;
  if (!transposed) {
    // Row-major scores have 64 columns, zero-padded past nk: those are masked by the clear bits too.
    for (Tokens i = 0; i < nq; ++i) keep_columns(s + i * simd::kTile, bits[i]);
    return;
  }
  ::fulcrum::kernels::detail::transpose_bits(bits);  // bits[j]: the queries that key j is visible to
  for (int j = 0; j < nk; ++j) keep_columns(s + j * simd::kTile, bits[j]);
}

/// Sets masked scores to -inf. Keys past `keys.size()` (a short last tile) are masked too; a full
/// 64-key tile is left as is.
FULCRUM_INLINE void mask_scores(float* s, bool transposed, const MaskSpec& mask, Tokens doc_len, Range queries,
                                Range keys, TileKind kind) {
  const int nk = static_cast<int>(keys.size());
  if (kind != TileKind::kPartial) {
    if (nk < simd::kTile) mask_rows(s, transposed, queries.size(), nk, [&](Tokens) { return (1ull << nk) - 1; });
    return;
  }
  mask_rows(s, transposed, queries.size(), nk,
            [&](Tokens i) { return mask.row_bits(queries.begin + i, keys.begin, nk, doc_len); });
}
