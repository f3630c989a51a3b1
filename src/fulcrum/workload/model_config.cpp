#include "fulcrum/workload/model_config.hpp"

#include "fulcrum/core/json_reader.hpp"

#include <filesystem>
#include <limits>

namespace fulcrum {

ModelShape model_shape_from_hf_config(const std::string& path) {
  const JsonDocument document = JsonDocument::read_file(path, "config");
  const JsonValue root = document.root();
  constexpr int kMax = std::numeric_limits<int>::max();
  auto required = [&](std::string_view field) { return root.at(field).integer<int>(1, kMax); };

  ModelShape shape;
  const std::filesystem::path file(path);
  shape.name =
      file.stem() == "config" && file.has_parent_path() ? file.parent_path().filename().string() : file.stem().string();
  if (shape.name.empty()) shape.name = "config";
  shape.hidden = required("hidden_size");
  shape.layers = required("num_hidden_layers");
  shape.q_heads = required("num_attention_heads");
  shape.ffn_hidden = required("intermediate_size");
  shape.kv_heads = root.has("num_key_value_heads") ? required("num_key_value_heads") : shape.q_heads;
  if (shape.q_heads % shape.kv_heads != 0) {
    root.at("num_key_value_heads").fail_must(fmt::format("a divisor of num_attention_heads = {}", shape.q_heads));
  }
  if (root.has("head_dim") && !root.at("head_dim").json().is_null()) {
    shape.head_dim = required("head_dim");
  } else {
    if (shape.hidden % shape.q_heads != 0) {
      root.at("hidden_size")
          .fail_must(fmt::format("a multiple of num_attention_heads = {} (or give head_dim)", shape.q_heads));
    }
    shape.head_dim = shape.hidden / shape.q_heads;
  }
  shape.rms_norm_eps = root.has("rms_norm_eps") ? root.at("rms_norm_eps").number(1e-12, 0.5) : 1e-6;
  shape.rope_theta = root.has("rope_theta") ? root.at("rope_theta").number(1.0 + 1e-9, 1e12) : 10000;
  if (root.has("torch_dtype") && root.at("torch_dtype").json().is_string()) {
    const std::string dtype = root.at("torch_dtype").string();
    shape.dtype_bytes = dtype == "float32" ? 4 : 2;
  }
  try {
    shape.validate();
  } catch (const Error& e) {
    fail("{}: {}", path, e.what());
  }
  return shape;
}

ModelShape resolve_model_shape(std::string_view preset_or_path) {
  const std::string text(preset_or_path);
  ModelShape shape = text.ends_with(".json") ? model_shape_from_hf_config(text) : model_shape_preset(text);
  shape.validate();
  return shape;
}

}  // namespace fulcrum
