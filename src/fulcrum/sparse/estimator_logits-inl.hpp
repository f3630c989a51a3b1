// MTraining's estimator, the logit product (no include guard): compiled once per ISA by estimator.cpp,
// inside its isa_* namespaces (core/simd_foreach_isa.hpp), where `Isa` is the version's type.
#include "fulcrum/core/simd_ops-inl.hpp"

// Logits of q head `h`'s observation rows against the local keys in base 2 (scaled by
// log2(e) / sqrt(head_dim), for exp2), -inf where the key is after the row or the row is padding,
// key-major: out[j * rows + i]. Also each row's maximum. A logit is the same fp32 sum in element order
// for every key, so the value of a (row, key) pair does not depend on which rank holds the key.
// The product runs in register blocks of the ISA's (core/simd.hpp): Isa::kBlockRows keys at a time against
// Isa::kBlockVecs row vectors, a block's sums held in registers over the whole head dimension. This ISA's
// version; FULCRUM_DISPATCH calls it.
void head_logits(const EstimatorShape& s, const KeyRows& keys, int h, const std::vector<float>& qt, Tokens window,
                 Tokens rows, Tokens first_row, float scale, float* out, double* row_max) {
  // The ISA's own vectors (the file's Vec is the 16-float one of the exact reductions).
  using V = Isa::Vec;
  using IV = Isa::IVec;
  constexpr Tokens L = Isa::kLanes, kRowBlockVecs = kRowBlock / L;
  constexpr Tokens kKeys = Isa::kBlockRows, kVecs = Isa::kBlockVecs;
  const auto n = static_cast<Tokens>(keys.positions.size());
  const Tokens dim = s.head_dim, stride = s.kv_heads * dim;
  const float* k_head = keys.k.data() + static_cast<std::ptrdiff_t>(h / (s.q_heads / s.kv_heads) * dim);
  IV lane;
  for (int l = 0; l < L; ++l) lane[l] = l;
  for (Tokens c = 0; c < rows; c += kRowBlock) {
    V maxima[kRowBlockVecs];
    for (auto& m : maxima) m = splat<V>(kNegInf);
    for (Tokens j0 = 0; j0 < n; j0 += kKeys) {
      // The last step repeats the last key where keys run out; its copies are not stored.
      const float* k[kKeys];
      for (Tokens r = 0; r < kKeys; ++r) k[r] = k_head + std::min(j0 + r, n - 1) * stride;
      for (Tokens v0 = 0; v0 < kRowBlockVecs; v0 += kVecs) {
        V acc[kKeys][kVecs] = {};
        for (Tokens e = 0; e < dim; ++e) {
          const float* qe = qt.data() + e * rows + c + v0 * L;
          V q[kVecs];
          for (Tokens v = 0; v < kVecs; ++v) q[v] = load<V>(qe + v * L);
          for (Tokens r = 0; r < kKeys; ++r) {
            const V kr = splat<V>(k[r][e]);
            for (Tokens v = 0; v < kVecs; ++v) acc[r][v] += kr * q[v];
          }
        }
        for (Tokens r = 0; r < std::min(kKeys, n - j0); ++r) {
          const Tokens j = j0 + r;
          // Rows from `first_visible` on see the key; the bounds are clamped into int32 range.
          const auto first_visible = static_cast<std::int32_t>(
              std::clamp<Tokens>(keys.positions[static_cast<std::size_t>(j)] - first_row - c, 0, kRowBlock));
          const auto end = static_cast<std::int32_t>(std::clamp<Tokens>(window - c, 0, kRowBlock));
          for (Tokens v = 0; v < kVecs; ++v) {
            const IV row = lane + static_cast<std::int32_t>((v0 + v) * L);
            const IV visible = (row >= first_visible) & (row < end);
            const V value = visible ? acc[r][v] * splat<V>(scale) : splat<V>(kNegInf);
            store(out + j * rows + c + (v0 + v) * L, value);
            maxima[v0 + v] = max(maxima[v0 + v], value);
          }
        }
      }
    }
    for (Tokens i = c; i < std::min(window, c + kRowBlock); ++i) {
      row_max[i] = static_cast<double>(maxima[(i - c) / L][(i - c) % L]);
    }
  }
}
