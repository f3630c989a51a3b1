// A plan's binary form from outside (Plan.from_bytes, `load_plan`), then verify_plan and the simulator.
#include "plan_check.hpp"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace fulcrum;
  Plan plan;
  try {
    plan = plan_from_binary({data, size});
  } catch (const Error& e) {
    return fuzz::refused(e);
  }
  fuzz::check_decoded_plan(plan);
  return 0;
}
