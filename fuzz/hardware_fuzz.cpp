// A hardware model from a JSON file (`--hardware FILE`, `--simulate FILE`, HardwareModel.from_dict). It is
// refused with a bad-input Error naming the field, or every time it models is finite and a fixed small plan
// (DistCA over 16 ranks, so any node size has intra- and inter-node messages) simulates to a finite
// makespan without an error: a model that passes validation never reports a deadlock or an infinity.
#include "fuzz_support.hpp"

#include "fulcrum/core/json_reader.hpp"
#include "fulcrum/cost/hardware_model.hpp"
#include "fulcrum/plan/compile.hpp"
#include "fulcrum/planners/planner.hpp"
#include "fulcrum/sim/engine.hpp"
#include "fulcrum/workload/batch.hpp"
#include "fulcrum/workload/model_shape.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace {

const fulcrum::Plan& fixed_plan() {
  using namespace fulcrum;
  static const Plan plan = [] {
    PlannerOptions options;
    options.model = model_shape_preset("tiny");
    std::vector<Document> documents;
    for (Tokens length : {900, 60, 300, 2000, 40, 700, 120, 1000}) {
      documents.push_back({static_cast<std::int64_t>(documents.size()), length, MaskSpec::causal()});
    }
    const Batch batch = pack_batch(documents, 16, 320);
    const Assignment assignment = make_planner("distca", options)->plan(batch);
    return compile(assignment, head_layout(options.model, 2), Pass::kForward, CommMode::kPingPong);
  }();
  return plan;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace fulcrum;
  HardwareModel hardware;
  try {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    hardware = HardwareModel::from_json(JsonDocument::parse(text, "fuzz.json", "hardware").root());
  } catch (const Error& e) {
    return fuzz::refused(e);
  }
  for (const Tokens length : {Tokens{1}, Tokens{1000}, Tokens{1} << 20}) {
    const double flops = 4.0 * 128 * static_cast<double>(length) * static_cast<double>(length);
    for (const double s :
         {hardware.attention_forward_s(length, length, flops),
          hardware.attention_backward_s(length, length, 2.5 * flops), hardware.linear_s(flops), hardware.copy_s(flops),
          hardware.intra_node.transfer_s(flops), hardware.inter_node.transfer_s(flops)}) {
      FUZZ_CHECK(std::isfinite(s) && s >= 0, "{} tokens: a modelled time of {} s", length, s);
    }
  }
  const sim::SimResult result = sim::simulate_plan(fixed_plan(), hardware);
  FUZZ_CHECK(std::isfinite(result.makespan_s) && result.makespan_s > 0, "makespan {}", result.makespan_s);
  return 0;
}
