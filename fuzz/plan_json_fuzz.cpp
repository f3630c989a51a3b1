// A plan's JSON form from outside (Plan.from_dict, `load_plan` of a .json), then verify_plan and the simulator.
#include "plan_check.hpp"

#include "fulcrum/core/json_reader.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace fulcrum;
  Plan plan;
  try {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    plan = plan_from_json(JsonDocument::parse(text, "fuzz.json", "plan").root());
  } catch (const Error& e) {
    return fuzz::refused(e);
  }
  fuzz::check_decoded_plan(plan);
  return 0;
}
