#include "fulcrum/sim/memory.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/cost/model_cost.hpp"

#include <nlohmann/json.hpp>

namespace fulcrum::sim {

std::string_view to_string(Recompute recompute) {
  switch (recompute) {
    case Recompute::kNone: return "none";
    case Recompute::kSelective: return "selective";
    case Recompute::kFull: return "full";
  }
  return "?";
}

Recompute parse_recompute(std::string_view text, std::string_view field) {
  for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    if (text == to_string(r)) return r;
  }
  fail("{} = '{}': must be none, selective or full", field, text);
}

bool parse_zero1(std::string_view text, std::string_view field) {
  if (text != "0" && text != "1") fail("{} = '{}': must be 0 or 1", field, text);
  return text == "1";
}

double MemoryUse::total_bytes() const {
  return weights_bytes + gradients_bytes + optimizer_bytes + activations_bytes + attention_buffers_bytes;
}

nlohmann::json MemoryUse::to_json() const {
  return {{"weights_bytes", weights_bytes},
          {"gradients_bytes", gradients_bytes},
          {"optimizer_bytes", optimizer_bytes},
          {"activations_bytes", activations_bytes},
          {"attention_buffers_bytes", attention_buffers_bytes},
          {"total_bytes", total_bytes()},
          {"capacity_bytes", capacity_bytes},
          {"out_of_memory", out_of_memory()}};
}

double layer_parameters(const ModelShape& model) {
  return linear_forward_flops_per_token(model) / 2;  // one multiply-add (2 FLOPs) per weight per token
}

double kept_activation_bytes_per_token(const ModelShape& model, Recompute recompute) {
  switch (recompute) {
    case Recompute::kNone: return activation_bytes_per_token(model);
    case Recompute::kSelective: return activation_bytes_per_token(model) - lse_bytes_per_token(model);
    case Recompute::kFull: return static_cast<double>(model.hidden) * model.dtype_bytes;  // the layer's input
  }
  return 0;
}

MemoryUse memory_per_gpu(const ModelShape& model, const HardwareModel& gpu, const ParallelConfig& parallel,
                         const MemoryPolicy& policy, const ActivationLoad& load) {
  const int stage_layers = model.layers / parallel.pp;
  const double parameters = layer_parameters(model) * stage_layers / parallel.tp;
  MemoryUse m;
  m.capacity_bytes = gpu.memory_bytes;
  m.weights_bytes = 2 * parameters;
  m.gradients_bytes = 4 * parameters;
  m.optimizer_bytes = 12 * parameters / (policy.zero1 ? parallel.dp() : 1);
  m.activations_bytes =
      kept_activation_bytes_per_token(model, policy.recompute) * load.tokens_in_flight * stage_layers / parallel.tp;
  if (policy.recompute == Recompute::kFull) {  // the layer being recomputed, for one micro-batch
    m.activations_bytes += activation_bytes_per_token(model) * load.microbatch_tokens / parallel.tp;
  }
  m.attention_buffers_bytes = load.attention_buffer_bytes / parallel.tp;
  return m;
}

}  // namespace fulcrum::sim
