// A model file (`--model FILE`, `fulcrum models FILE`, fulcrum.model_shape): a Hugging Face config.json or a
// Fulcrum model file. Either it is refused with a bad-input Error naming the field, or the shape it gives
// passes its own validation and every quantity the planners and the simulator derive from it is finite and
// positive: a model that loads never yields a NaN cost or an overflowed count.
#include "fuzz_support.hpp"

#include "fulcrum/core/json_reader.hpp"
#include "fulcrum/cost/model_cost.hpp"
#include "fulcrum/sim/memory.hpp"
#include "fulcrum/workload/model_config.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace fulcrum;
  ModelShape shape;
  try {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    const JsonDocument document = JsonDocument::parse(text, "fuzz.json", "model");
    shape = model_shape_from_json(document.root().json(), "fuzz");
  } catch (const Error& e) {
    return fuzz::refused(e);
  }
  shape.validate();  // what loaded must be what the rest of Fulcrum accepts
  for (const double x : {linear_forward_flops_per_token(shape), sim::layer_parameters(shape)}) {
    FUZZ_CHECK(std::isfinite(x) && x > 0, "a derived quantity of {} from a model that loaded", x);
  }
  return 0;
}
