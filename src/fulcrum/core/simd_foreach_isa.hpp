// Compiles FULCRUM_ISA_INCLUDE (a *-inl.hpp file of vector code) once per ISA: inside namespaces
// isa_baseline, isa_avx2 and isa_avx512 of the including scope, each with `Isa` naming its type
// (core/simd.hpp) and every function the file defines compiled for that ISA (a target pragma around the
// namespace). The way Highway's foreach_target works, by hand: one build carries every version, and
// FULCRUM_DISPATCH picks one at run time. Hand-written rather than GCC's target_clones, whose clones
// share one body and so cannot change vector width or register blocking; Highway itself would bring its
// own vector types, and the kernels are written in GCC's. No include guard: included once per file of
// vector code, after everything that file needs.
#ifndef FULCRUM_ISA_INCLUDE
#error "define FULCRUM_ISA_INCLUDE (the vector code to compile per ISA) before including simd_foreach_isa.hpp"
#endif

namespace isa_baseline {
using Isa = ::fulcrum::simd::Baseline;
#include FULCRUM_ISA_INCLUDE
}  // namespace isa_baseline

#if !FULCRUM_SIMD_BASELINE_ONLY
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#endif
namespace isa_avx2 {
using Isa = ::fulcrum::simd::Avx2;
#include FULCRUM_ISA_INCLUDE
}  // namespace isa_avx2
#if defined(__clang__)
#pragma clang attribute pop
#pragma clang attribute push(__attribute__((target("avx512f"))), apply_to = function)
#else
#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("avx512f")
#endif
namespace isa_avx512 {
using Isa = ::fulcrum::simd::Avx512;
#include FULCRUM_ISA_INCLUDE
}  // namespace isa_avx512
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif  // !FULCRUM_SIMD_BASELINE_ONLY

#undef FULCRUM_ISA_INCLUDE
