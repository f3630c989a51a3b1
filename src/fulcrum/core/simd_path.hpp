// Which instruction set the kernels run. One build carries a version of every hot entry point per ISA
// (core/simd_foreach_isa.hpp, FULCRUM_DISPATCH); this picks one at run time. Apart from simd.hpp so that callers need
// not see its 64-byte vector types (GCC warns about their ABI without -Wno-psabi).
#pragma once

#include <string>
#include <string_view>

// 1: this build compiles the baseline version only (CMake's FULCRUM_SIMD_BASELINE_ONLY, which the tsan preset
// sets: the kernels' threading is the same in every version, and the other two tripled its kernel compile
// time). cpu_supports() then answers false for the others, so tests that compare the versions skip them.
#ifndef FULCRUM_SIMD_BASELINE_ONLY
#define FULCRUM_SIMD_BASELINE_ONLY 0
#endif

namespace fulcrum::simd {

/// The kernels' versions, slowest first: x86-64's SSE2 baseline, AVX2 with FMA, AVX-512F.
enum class Isa { kBaseline, kAvx2, kAvx512 };

/// "baseline", "avx2", "avx512".
const char* to_string(Isa isa);
/// The inverse of to_string; anything else fails naming the allowed values and `what` (e.g. an option).
Isa parse_isa(std::string_view text, std::string_view what);
/// Whether this build carries `isa` and this CPU (and its OS) runs it.
bool cpu_supports(Isa isa);
/// parse_isa, then fails unless this CPU runs it, naming `what` and the best it runs.
Isa require_isa(std::string_view text, std::string_view what);
/// The best ISA this CPU supports.
Isa best_isa();

/// The version the kernels run: the environment's FULCRUM_SIMD (avx512 | avx2 | baseline, checked against
/// the CPU) when set, else best_isa(); select_isa() replaces it.
Isa active_isa();
/// Makes every kernel call from now on run `isa` (`fulcrum bench kernels --simd`, the tests that compare
/// the versions); fails when the CPU lacks it.
void select_isa(Isa isa);

/// What runs, for people: e.g. "avx2 (run-time dispatch; best on this CPU: avx2)"; printed by
/// `fulcrum bench kernels` and returned by `fulcrum.simd_path()`.
std::string simd_path();

}  // namespace fulcrum::simd
