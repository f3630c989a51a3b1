// Where a ModelShape comes from: a preset name, a Hugging Face config.json (Llama-family field names), or a
// Fulcrum model file (ModelShape's own fields): what every command's `--model` and Python's
// `fulcrum.model_shape` accept.
#pragma once

#include "fulcrum/workload/model_shape.hpp"

#include <nlohmann/json_fwd.hpp>

#include <string>
#include <string_view>

namespace fulcrum {

/// The Fulcrum model file's version; `schema_version` in it may be omitted or this.
inline constexpr int kModelSchemaVersion = 1;

/// A model file, validated: a Hugging Face config.json or a Fulcrum model file.
///  - A config.json has num_attention_heads. Read: hidden_size, num_hidden_layers, num_attention_heads,
///    intermediate_size (required), num_key_value_heads (default: num_attention_heads), head_dim (default:
///    hidden_size / num_attention_heads, which must then divide), rms_norm_eps (default 1e-6), rope_theta
///    (default 10000; or rope_parameters.rope_theta) and torch_dtype or dtype (bfloat16 or float16: 2 bytes,
///    float32: 4; default 2). Other fields are ignored: a config.json carries dozens that do not size
///    attention. The shape is named by the file's parent folder when the stem is "config" (how Hugging Face
///    stores models), else by the stem.
///  - A Fulcrum model file has q_heads: every field of ModelShape by its own name, rms_norm_eps, rope_theta
///    and dtype_bytes optional, an unknown field an error.
/// Errors are bad input naming the file and the field, e.g. "config.json: model.num_key_value_heads = 3:
/// must be a divisor of num_attention_heads = 32".
ModelShape read_model_file(const std::string& path);

/// The same from JSON already parsed (a config dict handed over from Python); `name` names a Hugging Face
/// config, which has no name of its own. Errors name the field under "model".
ModelShape model_shape_from_json(const nlohmann::json& json, const std::string& name);

/// A preset name, else a path to a model file (read_model_file). Validated. An unknown name that is not
/// an existing file is bad input listing the presets.
ModelShape resolve_model_shape(std::string_view preset_or_path);

/// The Fulcrum model file for `shape` (with schema_version): what `fulcrum models --json` writes and
/// read_model_file reads back.
nlohmann::json model_shape_json(const ModelShape& shape);

}  // namespace fulcrum
