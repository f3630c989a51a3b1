// A ModelShape from a Hugging Face config.json (Llama-family field names), or from a preset name: what
// `fulcrum prefill --model` accepts.
#pragma once

#include "fulcrum/workload/model_shape.hpp"

#include <string>
#include <string_view>

namespace fulcrum {

/// Reads hidden_size, num_hidden_layers, num_attention_heads, intermediate_size (required),
/// num_key_value_heads (default: num_attention_heads), head_dim (default: hidden_size /
/// num_attention_heads, which must then divide), rms_norm_eps (default 1e-6) and rope_theta (default
/// 10000). Other fields are ignored. Errors are bad input naming the file and the field, e.g.
/// "config.json: config.num_key_value_heads = 3: must be a divisor of num_attention_heads = 32".
/// The shape's name is the file's stem's parent folder name when the stem is "config", else the stem.
ModelShape model_shape_from_hf_config(const std::string& path);

/// A preset name, or a path ending in ".json" read by model_shape_from_hf_config. Validated.
ModelShape resolve_model_shape(std::string_view preset_or_path);

}  // namespace fulcrum
