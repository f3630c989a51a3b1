// Which of the kernels' ISA versions (FULCRUM_SIMD_CLONES, core/simd.hpp) this process runs. Apart from
// simd.hpp so that callers need not see its 64-byte vector types (GCC warns about their ABI without
// -Wno-psabi).
#pragma once

namespace fulcrum::simd {

/// What FULCRUM_SIMD_CLONES' load-time resolvers pick on this CPU, e.g. "avx512f (run-time dispatch)";
/// printed by `fulcrum bench kernels` and returned by `fulcrum.simd_path()`.
const char* simd_path();

}  // namespace fulcrum::simd
