// Memory per GPU of a training job, so a configuration that does not fit is reported, not timed.
// Megatron-LM's layout, under a stated policy (MemoryPolicy):
//  - bf16 weights and fp32 main gradients of the GPU's 1/(tp x pp) of the parameters (6 bytes each);
//  - Adam's fp32 master weights and two moments (12 bytes per parameter), sharded over the dp groups of a
//    stage with ZeRO-1 (Megatron's distributed optimizer), else whole on every GPU;
//  - activations kept for backward: activation_bytes_per_token (model_cost.hpp) x the tokens a TP group
//    holds over the micro-batches in flight x the stage's layers, split over tp (sequence parallelism),
//    less what the recomputation policy recomputes (Recompute);
//  - attention buffers: the largest pass's compiled workspace for one layer (what the executor allocates;
//    freed after the layer), split over tp: each task's Q-side rows and, per document, the stretch of keys
//    its tasks see, local rows included. Per-document CP's all-gathered K/V, a ring's received steps and a
//    DistCA server's received Q/K/V live here. None is kept across layers: backward receives them again,
//    as TransformerEngine's all-gather and ring CP re-gather K/V in backward.
// Not modelled: the embedding and LM head (ModelShape has no vocabulary), communication libraries' buffers,
// allocator fragmentation and the framework's workspace; a real job has less headroom than this reports.
#pragma once

#include "fulcrum/sim/parallel.hpp"

#include <nlohmann/json_fwd.hpp>

#include <string>
#include <string_view>

namespace fulcrum::sim {

/// What the backward pass recomputes instead of keeping from the forward pass.
enum class Recompute {
  kNone,       // every activation of every layer kept
  kSelective,  // core attention recomputed from Q/K/V (Megatron's selective recomputation): with a
               // FlashAttention kernel, which keeps no score matrix, that frees only the fp32 LSE, since
               // Q/K/V are the recomputation's inputs and the output is the projection's saved input
  kFull,       // every layer recomputed from its input: a hidden vector per token per layer kept, and one
               // layer's activations of one micro-batch live at a time while it is recomputed
};
std::string_view to_string(Recompute recompute);
/// "none" | "selective" | "full"; fails naming `field` otherwise.
Recompute parse_recompute(std::string_view text, std::string_view field = "recompute");

/// "0" | "1" -> MemoryPolicy::zero1; fails naming `field` otherwise.
bool parse_zero1(std::string_view text, std::string_view field = "zero1");

struct MemoryPolicy {
  Recompute recompute = Recompute::kNone;
  bool zero1 = true;  // optimizer states sharded over dp (Megatron's distributed optimizer)
};

/// What an iteration holds at once, from the simulated schedule.
struct ActivationLoad {
  double tokens_in_flight = 0;        // the most tokens one TP group holds activations for at once
  double microbatch_tokens = 0;       // the most tokens of one micro-batch of a TP group
  double attention_buffer_bytes = 0;  // the group's largest per-layer attention buffers
};

struct MemoryUse {
  double weights_bytes = 0, gradients_bytes = 0, optimizer_bytes = 0, activations_bytes = 0,
         attention_buffers_bytes = 0;
  double capacity_bytes = 0;
  double total_bytes() const;
  bool out_of_memory() const { return total_bytes() > capacity_bytes; }
  nlohmann::json to_json() const;
};

/// Parameters of the transformer layers (QKV, O, MLP; norms and embeddings excluded).
double layer_parameters(const ModelShape& model);

/// Activation bytes one token keeps per layer for backward under `recompute` (without the working set of
/// a layer being recomputed).
double kept_activation_bytes_per_token(const ModelShape& model, Recompute recompute);

MemoryUse memory_per_gpu(const ModelShape& model, const HardwareModel& gpu, const ParallelConfig& parallel,
                         const MemoryPolicy& policy, const ActivationLoad& load);

}  // namespace fulcrum::sim
