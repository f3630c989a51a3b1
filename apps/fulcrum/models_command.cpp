// `fulcrum models`: the model shapes `--model` accepts, as Fulcrum reads them: the presets, or the files
// given (a Hugging Face config.json or a Fulcrum model file), so a user sees what a config became before
// planning with it.
#include "commands.hpp"

#include "fulcrum/report/report_json.hpp"
#include "fulcrum/report/table.hpp"
#include "fulcrum/workload/model_config.hpp"
#include "outputs.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <memory>

namespace fulcrum::cli {
namespace {

struct ModelsConfig {
  std::vector<std::string> files;
  std::string json;
};

int run_models(const ModelsConfig& c) {
  if (!c.json.empty()) check_output_file("json", c.json);
  std::vector<std::pair<std::string, ModelShape>> models;  // (source, shape)
  if (c.files.empty()) {
    for (const auto& name : model_shape_preset_names()) models.emplace_back("preset", model_shape_preset(name));
  }
  for (const auto& file : c.files) models.emplace_back(file, read_model_file(file));

  Table table({"name", "layers", "hidden", "q_heads", "kv_heads", "head_dim", "ffn_hidden", "dtype_bytes",
               "rms_norm_eps", "rope_theta", "source"});
  nlohmann::json list = nlohmann::json::array();
  for (const auto& [source, shape] : models) {
    table.add_row({shape.name, fmt::format("{}", shape.layers), fmt::format("{}", shape.hidden),
                   fmt::format("{}", shape.q_heads), fmt::format("{}", shape.kv_heads),
                   fmt::format("{}", shape.head_dim), fmt::format("{}", shape.ffn_hidden),
                   fmt::format("{}", shape.dtype_bytes), fmt::format("{:g}", shape.rms_norm_eps),
                   fmt::format("{:g}", shape.rope_theta), source});
    nlohmann::json entry = model_shape_json(shape);
    entry.erase("schema_version");
    entry["source"] = source;
    list.push_back(std::move(entry));
  }
  fmt::print("{}", table.to_string());
  if (!c.json.empty()) {
    nlohmann::json report = report_object();
    report["models"] = std::move(list);
    write_output_json("json", c.json, report);
  }
  return 0;
}

}  // namespace

CLI::Option* add_model_option(CLI::App& cmd, std::string& model, std::string_view what) {
  return cmd
      .add_option("--model", model,
                  fmt::format("a preset ({}; `fulcrum models` lists them), a Hugging Face config.json or a Fulcrum "
                              "model .json: {}",
                              fmt::join(model_shape_preset_names(), ", "), what))
      ->capture_default_str();
}

Action add_models_command(CLI::App& app) {
  auto c = std::make_shared<ModelsConfig>();
  CLI::App* cmd = app.add_subcommand(
      "models", "List the model presets, or show how Fulcrum reads model files (what every --model accepts)");
  cmd->add_option("files", c->files,
                  "model files to read instead of listing the presets: a Hugging Face config.json or a Fulcrum "
                  "model .json (docs/schemas/model.schema.json)");
  add_output_option(*cmd, "json", c->json, "also write the models as JSON to this path");
  return [c] { return run_models(*c); };
}

}  // namespace fulcrum::cli
