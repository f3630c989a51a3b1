// bfloat16 storage: the top 16 bits of an IEEE float. Kernels load it into fp32 and accumulate in fp32.
#pragma once

#include <bit>
#include <cstdint>
#include <type_traits>

namespace fulcrum::kernels {

struct BFloat16 {
  std::uint16_t bits = 0;
  friend bool operator==(BFloat16, BFloat16) = default;
};

inline float to_float(float x) { return x; }
inline float to_float(BFloat16 x) { return std::bit_cast<float>(static_cast<std::uint32_t>(x.bits) << 16); }

/// Round to nearest, ties to even (what hardware conversions and PyTorch do); NaN stays NaN.
inline BFloat16 to_bf16(float x) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return {static_cast<std::uint16_t>((u >> 16) | 0x40u)};
  const std::uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return {static_cast<std::uint16_t>((u + rounding) >> 16)};
}

/// Stores an fp32 value as T (float or BFloat16).
template <class T>
T from_float(float x) {
  if constexpr (std::is_same_v<T, BFloat16>) {
    return to_bf16(x);
  } else {
    return x;
  }
}

}  // namespace fulcrum::kernels
