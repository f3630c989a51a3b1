#include "fulcrum/workload/model_shape.hpp"

#include "fulcrum/core/error.hpp"

#include <fmt/ranges.h>

namespace fulcrum {
namespace {

// Sources: Meta's Llama 3 8B config (32 layers, 4096 hidden, 32/8 heads, 14336 FFN); the DistCA paper's
// Llama-34B (48 layers, 8192 hidden, 64/8 heads, 22016 FFN); Qwen2.5-3B's config.json (36 layers, 2048
// hidden, 16/2 heads, 11008 FFN). RMSNorm epsilon and RoPE base from the same configs (Llama 3: 1e-5 and
// 500000; CodeLlama-34B, the DistCA paper's Llama-34B shape: 1e-5 and 1e6; Qwen2.5: 1e-6 and 1e6).
// small-gqa: ours, a Llama-shaped decoder whose 16 heads in 4 GQA groups give head assignments room to differ.
const ModelShape kPresets[] = {
    {"llama3-8b", 32, 4096, 32, 8, 128, 14336, 2, 1e-5, 500000},
    {"llama-34b", 48, 8192, 64, 8, 128, 22016, 2, 1e-5, 1e6},
    {"qwen2.5-3b", 36, 2048, 16, 2, 128, 11008, 2, 1e-6, 1e6},
    {"tiny", 2, 256, 4, 2, 64, 688, 2, 1e-5, 10000},
    {"small-gqa", 4, 512, 16, 4, 32, 1376, 2, 1e-5, 10000},
};

}  // namespace

void ModelShape::validate() const {
  auto positive = [&](std::string_view field, int value) {
    if (value < 1) fail("model.{} = {}: must be >= 1", field, value);
  };
  positive("layers", layers);
  positive("hidden", hidden);
  positive("q_heads", q_heads);
  positive("kv_heads", kv_heads);
  positive("head_dim", head_dim);
  positive("ffn_hidden", ffn_hidden);
  positive("dtype_bytes", dtype_bytes);
  if (!(rms_norm_eps > 0 && rms_norm_eps < 1)) fail("model.rms_norm_eps = {}: must be in (0, 1)", rms_norm_eps);
  if (!(rope_theta > 1)) fail("model.rope_theta = {}: must be > 1", rope_theta);
  if (q_heads % kv_heads != 0) {
    fail("model.kv_heads = {}: must divide q_heads = {}", kv_heads, q_heads);
  }
}

ModelShape model_shape_preset(std::string_view name) {
  for (const auto& preset : kPresets) {
    if (preset.name == name) return preset;
  }
  fail("model = '{}': unknown; choose one of {}", name, fmt::join(model_shape_preset_names(), ", "));
}

std::vector<std::string> model_shape_preset_names() {
  std::vector<std::string> names;
  for (const auto& preset : kPresets) names.push_back(preset.name);
  return names;
}

}  // namespace fulcrum
