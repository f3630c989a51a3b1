#include "fulcrum/core/simd_path.hpp"

#include "fulcrum/core/error.hpp"

#include <atomic>
#include <cstdlib>

namespace fulcrum::simd {
namespace {

// The ISA in use. Read on every kernel entry (one relaxed load); written at start-up and by select_isa.
std::atomic<Isa>& active() {
  static std::atomic<Isa> isa = [] {
    const char* env = std::getenv("FULCRUM_SIMD");
    if (env == nullptr || *env == '\0') return best_isa();
    return require_isa(env, "FULCRUM_SIMD");
  }();
  return isa;
}

}  // namespace

const char* to_string(Isa isa) {
  switch (isa) {
    case Isa::kAvx512: return "avx512";
    case Isa::kAvx2: return "avx2";
    case Isa::kBaseline: break;
  }
  return "baseline";
}

Isa parse_isa(std::string_view text, std::string_view what) {
  for (const Isa isa : {Isa::kAvx512, Isa::kAvx2, Isa::kBaseline}) {
    if (text == to_string(isa)) return isa;
  }
  fail("{} = '{}': expected avx512, avx2 or baseline", what, text);
}

bool cpu_supports(Isa isa) {
  if (FULCRUM_SIMD_BASELINE_ONLY && isa != Isa::kBaseline) return false;
  switch (isa) {
    case Isa::kAvx512: return __builtin_cpu_supports("avx512f") != 0;
    case Isa::kAvx2: return __builtin_cpu_supports("avx2") != 0 && __builtin_cpu_supports("fma") != 0;
    case Isa::kBaseline: break;
  }
  return true;
}

Isa require_isa(std::string_view text, std::string_view what) {
  const Isa isa = parse_isa(text, what);
  if (FULCRUM_SIMD_BASELINE_ONLY && isa != Isa::kBaseline) {
    fail("{} = {}: this build compiles the baseline version only (FULCRUM_SIMD_BASELINE_ONLY)", what, text);
  }
  if (!cpu_supports(isa)) fail("{} = {}: this CPU does not run it (best: {})", what, text, to_string(best_isa()));
  return isa;
}

Isa best_isa() {
  if (cpu_supports(Isa::kAvx512)) return Isa::kAvx512;
  if (cpu_supports(Isa::kAvx2)) return Isa::kAvx2;
  return Isa::kBaseline;
}

Isa active_isa() { return active().load(std::memory_order_relaxed); }

void select_isa(Isa isa) { active().store(require_isa(to_string(isa), "simd"), std::memory_order_relaxed); }

std::string simd_path() {
  return std::string(to_string(active_isa())) + " (run-time dispatch; best on this CPU: " + to_string(best_isa()) + ")";
}

}  // namespace fulcrum::simd
