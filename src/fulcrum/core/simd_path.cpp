#include "fulcrum/core/simd_path.hpp"

namespace fulcrum::simd {

// Mirrors the resolver GCC emits for FULCRUM_SIMD_CLONES, target_clones("avx512f", "default"). The default
// clone is compiled for the build's own flags: the baseline unless the build asked for more (-march=native).
const char* simd_path() {
#if defined(__clang__)
#if defined(__AVX512F__)
  return "avx512 (compiled in; Clang build, no run-time dispatch)";
#elif defined(__AVX2__)
  return "avx2 (compiled in; Clang build, no run-time dispatch)";
#else
  return "portable (Clang build, no run-time dispatch)";
#endif
#else
  if (__builtin_cpu_supports("avx512f")) return "avx512f (run-time dispatch)";
#if defined(__AVX2__)
  return "default, built for AVX2 (run-time dispatch)";
#else
  return "default, x86-64 baseline (run-time dispatch)";
#endif
#endif
}

}  // namespace fulcrum::simd
