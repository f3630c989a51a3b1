// The element-wise vector helpers, on any GCC vector type V (no include guard). Included once per ISA
// (core/simd_foreach_isa.hpp), inside that ISA's namespace and target region, so that they are compiled
// for it: GCC lowers vector code in the function it is written in, before inlining, so a helper compiled
// for the baseline would hand an AVX2 kernel element-by-element broadcasts and split loads (measured:
// 2.3x slower, docs/decisions/0004-simd-three-isas.md). core/simd.hpp includes them once more for code outside
// dispatch.

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
  using I = typename ::fulcrum::simd::Lanes<::fulcrum::simd::kLanesOf<V>>::IVec;
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
