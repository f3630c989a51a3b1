#include "fulcrum/sim/prefill.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/planners/heads/evaluate.hpp"
#include "fulcrum/planners/heads/solver.hpp"
#include "fulcrum/sim/parallel.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <utility>

namespace fulcrum::sim {

heads::HeadCostModel preset_head_cost_model(const ModelShape& shape, const HardwareModel& hw, Tokens tokens,
                                            std::optional<heads::RuntimeProfile> profile) {
  heads::HeadCostModel model;
  model.profile = std::move(profile);
  model.analytic.head_dim = shape.head_dim;
  model.analytic.hidden = shape.hidden;
  model.analytic.attention_flops_per_s = 1.0 / hw.attention_forward_s(tokens, tokens, 1.0);
  model.analytic.gemm_flops_per_s = hw.peak_flops * hw.linear_mfu;
  return model;
}

void PrefillSimOptions::validate(const ModelShape& shape) const {
  if (tokens < 1) fail("tokens = {}: must be >= 1", tokens);
  if (devices < 1 || devices > shape.q_heads) {
    fail("devices = {}: must be in [1, {}] (the model's q heads)", devices, shape.q_heads);
  }
}

double PrefillSimResult::mean_spread() const {
  double sum = 0;
  for (const auto& l : layers) sum += l.spread;
  return layers.empty() ? 0 : sum / static_cast<double>(layers.size());
}

double PrefillSimResult::max_spread() const {
  double worst = 0;
  for (const auto& l : layers) worst = std::max(worst, l.spread);
  return worst;
}

namespace {

// Per device: bytes of its attention weights for one layer (WPR: only what its heads use).
std::vector<double> attention_weight_bytes(const ModelShape& shape, const heads::HeadAssignment& assignment,
                                           int devices, bool wpr) {
  const double matrix_per_head = static_cast<double>(shape.hidden) * shape.head_dim * shape.dtype_bytes;
  const auto n = static_cast<std::size_t>(devices);
  // Without WPR: the full W_Q, W_O (q heads) and W_K, W_V (kv heads) on every device.
  if (!wpr) return std::vector<double>(n, 2.0 * (shape.q_heads + shape.kv_heads) * matrix_per_head);
  const int group_size = shape.q_heads / shape.kv_heads;
  std::vector<double> bytes(n, 0);
  // [device][kv group]: whether the device already loads the group's W_K / W_V.
  std::vector<std::vector<char>> has_group(n, std::vector<char>(static_cast<std::size_t>(shape.kv_heads), 0));
  for (int h = 0; h < shape.q_heads; ++h) {
    const auto d = static_cast<std::size_t>(assignment[static_cast<std::size_t>(h)]);
    bytes[d] += 2.0 * matrix_per_head;  // its W_Q columns and W_O rows
    char& loaded = has_group[d][static_cast<std::size_t>(h / group_size)];
    if (loaded == 0) bytes[d] += 2.0 * matrix_per_head;  // the W_K / W_V of a KV group it needs, once
    loaded = 1;
  }
  return bytes;
}

}  // namespace

PrefillSimResult simulate_prefill(const ModelShape& shape, const HardwareModel& hw,
                                  const std::vector<heads::LayerCosts>& costs, const heads::ModelPlan& solved,
                                  const PrefillSimOptions& options) {
  options.validate(shape);
  const int devices = options.devices;
  FULCRUM_CHECK(costs.size() == static_cast<std::size_t>(shape.layers) && solved.assignment.size() == costs.size(),
                "{} layers, {} costs, {} assignments", shape.layers, costs.size(), solved.assignment.size());
  const auto n = static_cast<std::size_t>(devices);
  const double tokens = static_cast<double>(options.tokens);
  const double ffn_per_device = static_cast<double>(shape.ffn_hidden) / devices;

  PrefillSimResult result;
  result.solver = solved.solver;
  result.wpr = options.wpr;
  result.cpip = options.cpip;
  result.solve_s = solved.solve_s;
  const double mlp_s = hw.linear_s(6.0 * tokens * shape.hidden * ffn_per_device);
  // A machine without a host link (a CPU calibration) reads the weights from its own memory.
  const LinkSpec host = hw.has_host_link() ? hw.host_link : LinkSpec{hw.memory_bandwidth, 0};
  const double mlp_weights_s = host.transfer_s(3.0 * shape.hidden * ffn_per_device * shape.dtype_bytes);
  const double all_reduce_s =
      dp_gradient_sync_s(hw, devices, devices > hw.devices_per_node, tokens * shape.hidden * shape.dtype_bytes);

  std::vector<std::vector<double>> weights_s;  // [layer][device]: attention weights' load
  for (const auto& assignment : solved.assignment) {
    std::vector<double> per_device;
    for (double b : attention_weight_bytes(shape, assignment, devices, options.wpr)) {
      per_device.push_back(host.transfer_s(b));
    }
    weights_s.push_back(std::move(per_device));
  }
  if (options.cpip) result.first_load_s = *std::max_element(weights_s[0].begin(), weights_s[0].end());

  for (std::size_t l = 0; l < costs.size(); ++l) {
    const heads::LayerCosts& c = costs[l];
    const heads::HeadAssignment& assignment = solved.assignment[l];
    const heads::DeviceTimes times = heads::device_times(c, assignment, devices);
    SimulatedLayer layer;
    layer.attention_s.assign(n, 0);
    for (int h = 0; h < c.heads(); ++h) {
      layer.attention_s[static_cast<std::size_t>(assignment[static_cast<std::size_t>(h)])] +=
          c.attention_s[static_cast<std::size_t>(h)];
    }
    layer.block_s = times.time_s;
    layer.weights_s = weights_s[l];
    layer.mlp_s = mlp_s;
    layer.mlp_weights_s = mlp_weights_s;
    layer.all_reduce_s = all_reduce_s;
    layer.spread = times.spread();
    const bool last = l + 1 == costs.size();
    for (std::size_t d = 0; d < n; ++d) {
      double attention_phase = 0, mlp_phase = 0;
      if (options.cpip) {
        // The MLP weights of this layer stream in during attention; the next layer's attention weights
        // during the MLP.
        attention_phase = std::max(layer.block_s[d], mlp_weights_s);
        mlp_phase = std::max(mlp_s, last ? 0.0 : weights_s[l + 1][d]);
      } else {
        attention_phase = layer.weights_s[d] + layer.block_s[d];
        mlp_phase = mlp_weights_s + mlp_s;
      }
      layer.attention_phase_s = std::max(layer.attention_phase_s, attention_phase);
      layer.mlp_phase_s = std::max(layer.mlp_phase_s, mlp_phase);
    }
    layer.layer_s = layer.attention_phase_s + layer.mlp_phase_s + 2.0 * all_reduce_s;
    result.latency_s += layer.layer_s;
    result.layers.push_back(std::move(layer));
  }
  result.latency_s += result.first_load_s;
  result.tokens_per_s = tokens / result.latency_s;
  return result;
}

nlohmann::json to_json(const PrefillSimResult& result) {
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& l : result.layers) {
    layers.push_back({{"attention_s", l.attention_s},
                      {"block_s", l.block_s},
                      {"attention_weights_s", l.weights_s},
                      {"mlp_s", l.mlp_s},
                      {"mlp_weights_s", l.mlp_weights_s},
                      {"attention_phase_s", l.attention_phase_s},
                      {"mlp_phase_s", l.mlp_phase_s},
                      {"all_reduce_s", l.all_reduce_s},
                      {"spread", l.spread},
                      {"layer_s", l.layer_s}});
  }
  return {{"solver", result.solver},
          {"wpr", result.wpr},
          {"cpip", result.cpip},
          {"solve_s", result.solve_s},
          {"first_load_s", result.first_load_s},
          {"latency_s", result.latency_s},
          {"tokens_per_s", result.tokens_per_s},
          {"mean_spread", result.mean_spread()},
          {"max_spread", result.max_spread()},
          {"layers", layers}};
}

}  // namespace fulcrum::sim
