#include "fulcrum/sim/memory.hpp"

#include "fulcrum/cost/model_cost.hpp"

#include <nlohmann/json.hpp>

namespace fulcrum::sim {

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

MemoryUse memory_per_gpu(const ModelShape& model, const HardwareModel& gpu, const ParallelConfig& parallel,
                         double tokens_in_flight, double attention_buffer_bytes) {
  const int stage_layers = model.layers / parallel.pp;
  const double parameters = layer_parameters(model) * stage_layers / parallel.tp;
  MemoryUse m;
  m.capacity_bytes = gpu.memory_bytes;
  m.weights_bytes = 2 * parameters;
  m.gradients_bytes = 4 * parameters;
  m.optimizer_bytes = 12 * parameters / parallel.dp();
  m.activations_bytes = activation_bytes_per_token(model) * tokens_in_flight * stage_layers / parallel.tp;
  m.attention_buffers_bytes = attention_buffer_bytes / parallel.tp;
  return m;
}

}  // namespace fulcrum::sim
