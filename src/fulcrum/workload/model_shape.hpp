// The transformer shape that sets every cost: heads, head dim, hidden sizes, layers, dtype.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace fulcrum {

struct ModelShape {
  std::string name;
  int layers = 0;
  int hidden = 0;
  int q_heads = 0;
  int kv_heads = 0;  // < q_heads means grouped-query attention
  int head_dim = 0;
  int ffn_hidden = 0;
  int dtype_bytes = 2;  // bf16 activations
  // What a forward pass needs beyond the sizes (prefill/): RMSNorm's epsilon and RoPE's base.
  double rms_norm_eps = 1e-5;
  double rope_theta = 500000;

  /// Throws fulcrum::Error naming the field when a size is non-positive or heads do not group.
  void validate() const;
};

/// Presets: llama3-8b, llama-34b, qwen2.5-3b, tiny (a small shape for demos and tests), small-gqa (16 q heads in 4
/// GQA groups, small enough for a CPU prefill in seconds).
ModelShape model_shape_preset(std::string_view name);
std::vector<std::string> model_shape_preset_names();

}  // namespace fulcrum
