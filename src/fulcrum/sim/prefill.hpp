// FlexAttn's prefill on a modelled GPU node (`fulcrum prefill --simulate PRESET`): one long prompt through a
// Llama-shaped decoder on D tensor-parallel devices, each layer's q heads placed by a head solver. It answers
// "which assignment, and what throughput, on D GPUs at T tokens" without the GPUs.
//
// Per layer l and device d (everything in seconds):
//   block_d   = the heads cost model's device time (cost_model.hpp): Σ t_attn of d's heads + t_qo per head
//               + (t_qkvo - t_qo) per KV group with a head on d (the GQA leader rule);
//   mlp       = 6 T hidden ffn / D FLOPs (gate, up, down GEMMs, tensor-parallel) at peak x linear_mfu;
//   weights   = host memory -> device over hw.host_link (without one, at memory_bandwidth): attention part (WPR: d's
//   W_Q columns and W_O rows,
//               the W_K / W_V of its KV groups; without WPR the full four matrices) and MLP part (3 hidden
//               ffn / D); bf16 (shape.dtype_bytes);
//   phases    = CPIP: attention phase max(block_d, MLP weights of l), MLP phase max(mlp, attention weights of
//               l + 1), plus layer 0's attention weights before the first layer; without CPIP each load
//               precedes its compute;
//   all-reduce= ring over the node's link (inter-node when D exceeds a node): 2 (D - 1) / D x T hidden bytes
//               / bandwidth + 2 (D - 1) x hop latency (NCCL's ring: 2 (D - 1) steps; parallel.hpp's
//               dp_gradient_sync_s, the same ring); 0 with D = 1;
//   T_layer   = max_d attention phase + all-reduce + max_d MLP phase + all-reduce (each all-reduce waits for
//               the slowest device).
// Latency = Σ T_layer (+ the first load with CPIP); tokens/s = T / latency. Not modelled: embeddings, norms,
// RoPE, the LM head, copies overlapping the all-reduce, and kernels slowing when a copy shares memory.
//
// Head times: a runtime profile when given (measured: used as it is), else the analytic model at the preset's
// rates: visible pairs x 4 x head_dim FLOPs at the preset's full-tile attention rate (its FlashAttention
// fraction of peak, hardware_model.cpp), assumed for sparse patterns too, and projections at peak x
// linear_mfu.
#pragma once

#include "fulcrum/cost/hardware_model.hpp"
#include "fulcrum/planners/heads/cost_model.hpp"
#include "fulcrum/planners/heads/model_plan.hpp"
#include "fulcrum/planners/heads/patterns.hpp"
#include "fulcrum/workload/model_shape.hpp"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fulcrum::sim {

/// The head cost model on `hw`: the profile when given, else the analytic model at hw's rates for prompts
/// of `tokens` (the attention rate is hw's forward table at q = k = tokens).
heads::HeadCostModel preset_head_cost_model(const ModelShape& shape, const HardwareModel& hw, Tokens tokens,
                                            std::optional<heads::RuntimeProfile> profile);

struct PrefillSimOptions {
  Tokens tokens = 0;
  int devices = 1;
  bool wpr = true;
  bool cpip = true;
  /// Bad input naming the field: tokens >= 1, devices in [1, q heads].
  void validate(const ModelShape& shape) const;
};

struct SimulatedLayer {
  std::vector<double> attention_s;  // per device: Σ t_attn of its heads
  std::vector<double> block_s;      // per device: the cost model's time (attention + projections)
  std::vector<double> weights_s;    // per device: its attention weights' load
  double mlp_s = 0;                 // per device (the MLP splits evenly)
  double mlp_weights_s = 0;
  double attention_phase_s = 0;  // slowest device
  double mlp_phase_s = 0;        // slowest device
  double all_reduce_s = 0;       // one of the two
  double spread = 0;             // (max - min) / max of block_s
  double layer_s = 0;
};

struct PrefillSimResult {
  std::string solver;
  bool wpr = true;
  bool cpip = true;
  double solve_s = 0;
  double first_load_s = 0;  // CPIP: layer 0's attention weights before any compute
  std::vector<SimulatedLayer> layers;
  double latency_s = 0;
  double tokens_per_s = 0;
  double mean_spread() const;
  double max_spread() const;
};

/// One assignment ([layer][q head] -> device) simulated on `hw`.
PrefillSimResult simulate_prefill(const ModelShape& shape, const HardwareModel& hw,
                                  const std::vector<heads::LayerCosts>& costs, const heads::ModelPlan& solved,
                                  const PrefillSimOptions& options);

nlohmann::json to_json(const PrefillSimResult& result);

}  // namespace fulcrum::sim
