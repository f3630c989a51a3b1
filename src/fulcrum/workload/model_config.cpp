#include "fulcrum/workload/model_config.hpp"

#include "fulcrum/core/input_file.hpp"
#include "fulcrum/core/json_reader.hpp"

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <limits>

namespace fulcrum {
namespace {

constexpr int kMaxInt = std::numeric_limits<int>::max();

std::string name_from_path(const std::string& path) {
  const std::filesystem::path file(path);
  std::string name =
      file.stem() == "config" && file.has_parent_path() ? file.parent_path().filename().string() : file.stem().string();
  return name.empty() ? "config" : name;
}

int dtype_bytes_of(const JsonValue& dtype) {
  const std::string text = dtype.string();
  if (text == "bfloat16" || text == "float16") return 2;
  if (text == "float32") return 4;
  dtype.fail_must("one of bfloat16, float16, float32");
}

// RMSNorm's epsilon and RoPE's base, in the ranges both file kinds allow.
double rms_norm_eps_of(const JsonValue& value) { return value.number(1e-12, 0.5); }
double rope_theta_of(const JsonValue& value) { return value.number(1.0 + 1e-9, 1e12); }

ModelShape shape_from_hf(const JsonValue& root, std::string name) {
  auto required = [&](std::string_view field) { return root.at(field).integer<int>(1, kMaxInt); };
  ModelShape shape;
  shape.name = std::move(name);
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
  shape.rms_norm_eps = root.has("rms_norm_eps") ? rms_norm_eps_of(root.at("rms_norm_eps")) : 1e-6;
  shape.rope_theta = 10000;
  if (root.has("rope_theta")) {
    shape.rope_theta = rope_theta_of(root.at("rope_theta"));
  } else if (root.has("rope_parameters") && root.at("rope_parameters").has("rope_theta")) {  // transformers 5
    shape.rope_theta = rope_theta_of(root.at("rope_parameters").at("rope_theta"));
  }
  // transformers 4.56 renamed torch_dtype to dtype; either may be null in a config saved without one.
  for (const std::string_view key : {"dtype", "torch_dtype"}) {
    if (root.has(key) && !root.at(key).json().is_null()) {
      shape.dtype_bytes = dtype_bytes_of(root.at(key));
      break;
    }
  }
  return shape;
}

ModelShape shape_from_fulcrum(const JsonValue& root) {
  root.only_keys({"schema_version", "name", "layers", "hidden", "q_heads", "kv_heads", "head_dim", "ffn_hidden",
                  "dtype_bytes", "rms_norm_eps", "rope_theta"});
  if (root.has("schema_version") && root.at("schema_version").integer<int>(0, kMaxInt) != kModelSchemaVersion) {
    root.at("schema_version")
        .fail_because(fmt::format("this Fulcrum reads model files of version {}", kModelSchemaVersion));
  }
  auto required = [&](std::string_view field) { return root.at(field).integer<int>(1, kMaxInt); };
  ModelShape shape;
  shape.name = root.at("name").string();
  if (shape.name.empty()) root.at("name").fail_must("a non-empty string");
  shape.layers = required("layers");
  shape.hidden = required("hidden");
  shape.q_heads = required("q_heads");
  shape.kv_heads = required("kv_heads");
  shape.head_dim = required("head_dim");
  shape.ffn_hidden = required("ffn_hidden");
  if (root.has("dtype_bytes")) shape.dtype_bytes = root.at("dtype_bytes").integer<int>(1, 8);
  if (root.has("rms_norm_eps")) shape.rms_norm_eps = rms_norm_eps_of(root.at("rms_norm_eps"));
  if (root.has("rope_theta")) shape.rope_theta = rope_theta_of(root.at("rope_theta"));
  return shape;
}

ModelShape validated(ModelShape shape, const std::string& source) {
  try {
    shape.validate();
  } catch (const Error& e) {
    if (source.empty()) throw;
    fail("{}: {}", source, e.what());
  }
  return shape;
}

ModelShape shape_from_either(const JsonValue& root, const std::string& hf_name) {
  if (!root.json().is_object()) root.fail_must("an object");
  if (root.has("num_attention_heads")) return validated(shape_from_hf(root, hf_name), root.source());
  if (root.has("q_heads")) return validated(shape_from_fulcrum(root), root.source());
  root.fail_here(
      "neither a Hugging Face config.json (it has num_attention_heads) nor a Fulcrum model file (it has q_heads; "
      "docs/schemas/model.schema.json)");
}

}  // namespace

ModelShape read_model_file(const std::string& path) {
  const JsonDocument document = JsonDocument::read_file(path, "model");
  return shape_from_either(document.root(), name_from_path(path));
}

ModelShape model_shape_from_json(const nlohmann::json& json, const std::string& name) {
  const JsonDocument document(json, "", "model");
  return shape_from_either(document.root(), name.empty() ? "config" : name);
}

ModelShape resolve_model_shape(std::string_view preset_or_path) {
  const std::string text(preset_or_path);
  const auto names = model_shape_preset_names();
  if (std::find(names.begin(), names.end(), text) != names.end()) return model_shape_preset(text);
  std::error_code ignored;
  if (text.ends_with(".json") || std::filesystem::exists(bundled_path(text), ignored)) return read_model_file(text);
  fail("model = '{}': neither a preset ({}) nor a model file (a config.json or a Fulcrum model .json)", text,
       fmt::join(names, ", "));
}

nlohmann::json model_shape_json(const ModelShape& shape) {
  return {{"schema_version", kModelSchemaVersion},
          {"name", shape.name},
          {"layers", shape.layers},
          {"hidden", shape.hidden},
          {"q_heads", shape.q_heads},
          {"kv_heads", shape.kv_heads},
          {"head_dim", shape.head_dim},
          {"ffn_hidden", shape.ffn_hidden},
          {"dtype_bytes", shape.dtype_bytes},
          {"rms_norm_eps", shape.rms_norm_eps},
          {"rope_theta", shape.rope_theta}};
}

}  // namespace fulcrum
