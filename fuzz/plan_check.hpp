// The checks after a plan decodes (plan_binary_fuzz, plan_json_fuzz): what a plan from outside goes
// through before anything runs it. Decoding either refuses with a bad-input Error or gives a Plan that
// re-encodes to itself; verify_plan reports on any Plan without crashing or throwing; and a plan that
// passes it simulates to a finite time without an error (the simulator runs only verified plans).
#pragma once

#include "fuzz_support.hpp"

#include "fulcrum/cost/hardware_model.hpp"
#include "fulcrum/plan/program_verify.hpp"
#include "fulcrum/plan/serialize.hpp"
#include "fulcrum/sim/engine.hpp"

#include <nlohmann/json.hpp>

#include <cmath>

namespace fulcrum::fuzz {

/// Plans with more buffer rows than this are valid input but slow to verify (every row is labelled and
/// every instruction walks its rows), so the harness skips them; the library's own bound is kMaxPlanCells.
inline constexpr Tokens kFuzzPlanRows = Tokens{1} << 14;

inline bool small_enough(const Plan& plan) {
  Tokens rows = 0;
  for (const auto& p : plan.programs) {
    for (const auto& b : p.buffers) {
      if (b.rows < 0 || b.rows > kFuzzPlanRows) return b.rows < 0;  // negative rows: verify_plan's to report
      rows += b.rows;
      if (rows > kFuzzPlanRows) return false;
    }
  }
  for (const auto& d : plan.documents) {
    if (d.length > kFuzzPlanRows) return false;
  }
  return plan.heads.q_heads <= 64 && plan.heads.head_dim <= 256;
}

inline void check_decoded_plan(const Plan& plan) {
  FUZZ_CHECK(plan_from_binary(to_binary(plan)) == plan, "the binary encoding does not round-trip");
  if (!small_enough(plan)) return;
  const VerifyReport report = verify_plan(plan);
  if (!report.ok()) return;
  FUZZ_CHECK(plan_from_json(to_json(plan)) == plan, "a verified plan's JSON does not round-trip");
  static const HardwareModel hardware = hardware_preset("h200-dgx");
  const sim::SimResult result = sim::simulate_plan(plan, hardware);
  FUZZ_CHECK(std::isfinite(result.makespan_s) && result.makespan_s >= 0, "makespan {}", result.makespan_s);
}

}  // namespace fulcrum::fuzz
