#include "fulcrum/workload/model_config.hpp"

#include "fulcrum/core/error.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

namespace fulcrum {
namespace {

class ConfigFile {
 public:
  explicit ConfigFile(const std::string& text)
      // A folder per test: ctest runs the tests of this file as parallel processes. The config's own folder
      // keeps one name, which names the model.
      : path_((std::filesystem::temp_directory_path() /
               ("fulcrum-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name())) /
               "fulcrum-model-config-test" / "config.json")
                  .string()) {
    std::filesystem::create_directories(std::filesystem::path(path_).parent_path());
    std::ofstream(path_) << text;
  }
  ~ConfigFile() { std::filesystem::remove(path_); }
  ConfigFile(const ConfigFile&) = delete;
  ConfigFile& operator=(const ConfigFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Llama 3 8B's config.json, the fields Fulcrum reads (and some it ignores).
constexpr const char* kLlama3 = R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 4096,
  "intermediate_size": 14336, "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "torch_dtype": "bfloat16", "vocab_size": 128256})";

TEST(ModelConfig, ReadsAHuggingFaceLlamaConfigAsItsPreset) {
  const ConfigFile file(kLlama3);
  const ModelShape shape = read_model_file(file.path());
  const ModelShape preset = model_shape_preset("llama3-8b");
  EXPECT_EQ(shape.name, "fulcrum-model-config-test");  // config.json is named by its folder
  EXPECT_EQ(shape.layers, preset.layers);
  EXPECT_EQ(shape.hidden, preset.hidden);
  EXPECT_EQ(shape.q_heads, preset.q_heads);
  EXPECT_EQ(shape.kv_heads, preset.kv_heads);
  EXPECT_EQ(shape.head_dim, preset.head_dim);
  EXPECT_EQ(shape.ffn_hidden, preset.ffn_hidden);
  EXPECT_EQ(shape.rms_norm_eps, preset.rms_norm_eps);
  EXPECT_EQ(shape.rope_theta, preset.rope_theta);
  EXPECT_EQ(resolve_model_shape(file.path()).hidden, 4096);
  EXPECT_EQ(resolve_model_shape("tiny").hidden, 256);
}

TEST(ModelConfig, DefaultsKvHeadsHeadDimEpsAndTheta) {
  const ConfigFile file(R"({"hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 8,
    "num_hidden_layers": 2})");
  const ModelShape shape = read_model_file(file.path());
  EXPECT_EQ(shape.kv_heads, 8);
  EXPECT_EQ(shape.head_dim, 32);
  EXPECT_EQ(shape.rms_norm_eps, 1e-6);
  EXPECT_EQ(shape.rope_theta, 10000);
}

std::string error_of(const std::string& text) {
  const ConfigFile file(text);
  try {
    read_model_file(file.path());
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kBadInput);
    EXPECT_NE(std::string(e.what()).find(file.path()), std::string::npos) << e.what();
    return e.what();
  }
  return "";
}

TEST(ModelConfig, BadFieldsAreNamed) {
  const std::string base = R"("intermediate_size": 512, "num_attention_heads": 8, "num_hidden_layers": 2)";
  EXPECT_NE(error_of("{" + base + "}").find("model.hidden_size: missing"), std::string::npos)
      << error_of("{" + base + "}");
  EXPECT_NE(error_of(R"({"hidden_size": 0, )" + base + "}").find("model.hidden_size = 0"), std::string::npos);
  EXPECT_NE(error_of(R"({"hidden_size": 256.5, )" + base + "}").find("model.hidden_size"), std::string::npos);
  EXPECT_NE(
      error_of(R"({"hidden_size": 256, "num_key_value_heads": 3, )" + base + "}").find("model.num_key_value_heads = 3"),
      std::string::npos);
  EXPECT_NE(error_of(R"({"hidden_size": 250, )" + base + "}").find("model.hidden_size = 250"), std::string::npos);
  EXPECT_NE(error_of(R"({"hidden_size": 256, "rms_norm_eps": -1, )" + base + "}").find("model.rms_norm_eps"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"hidden_size": 256, "rope_theta": "big", )" + base + "}").find("model.rope_theta"),
            std::string::npos);
  EXPECT_NE(error_of("{not json").find("not JSON"), std::string::npos);
  try {
    read_model_file("/nonexistent/config.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/config.json"), std::string::npos);
  }
}

TEST(ModelConfig, AFulcrumModelFileRoundTrips) {
  ModelShape wide = model_shape_preset("small-gqa");
  wide.name = "wide";
  wide.q_heads = 32;
  wide.dtype_bytes = 4;
  const ConfigFile file(model_shape_json(wide).dump());
  const ModelShape read = read_model_file(file.path());
  EXPECT_EQ(model_shape_json(read), model_shape_json(wide));
  EXPECT_EQ(resolve_model_shape(file.path()).q_heads, 32);
  EXPECT_EQ(model_shape_from_json(model_shape_json(wide), "ignored").name, "wide");
}

TEST(ModelConfig, ReadModelFileTakesHuggingFaceConfigsAndTheirNewerFields) {
  const ConfigFile file(R"({"hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 8,
    "num_hidden_layers": 2, "dtype": "float32", "rope_parameters": {"rope_theta": 1e6, "rope_type": "default"}})");
  const ModelShape shape = read_model_file(file.path());
  EXPECT_EQ(shape.dtype_bytes, 4);
  EXPECT_EQ(shape.rope_theta, 1e6);
  EXPECT_EQ(shape.name, "fulcrum-model-config-test");
  const ModelShape from_dict = model_shape_from_json(nlohmann::json::parse(R"({"hidden_size": 256,
    "intermediate_size": 512, "num_attention_heads": 8, "num_hidden_layers": 2, "torch_dtype": null})"),
                                                     "");
  EXPECT_EQ(from_dict.name, "config");
  EXPECT_EQ(from_dict.dtype_bytes, 2);
}

std::string read_error(const std::string& text) {
  const ConfigFile file(text);
  try {
    read_model_file(file.path());
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kBadInput);
    return e.what();
  }
  return "";
}

TEST(ModelConfig, BadModelFilesAreNamed) {
  const std::string fulcrum = model_shape_json(model_shape_preset("tiny")).dump();
  const std::string hf = R"({"hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 8,
    "num_hidden_layers": 2)";
  EXPECT_NE(read_error(hf + R"(, "torch_dtype": "int4"})").find("model.torch_dtype = \"int4\": must be one of"),
            std::string::npos);
  EXPECT_NE(read_error(R"({"vocab_size": 1})").find("neither a Hugging Face config.json"), std::string::npos);
  EXPECT_NE(read_error("[1]").find("model = [1]: must be an object"), std::string::npos) << read_error("[1]");
  auto patched = [&](const char* key, nlohmann::json value) {
    nlohmann::json json = nlohmann::json::parse(fulcrum);
    json[key] = std::move(value);
    return read_error(json.dump());
  };
  EXPECT_NE(patched("heads", 4).find("model.heads: unknown field"), std::string::npos) << patched("heads", 4);
  EXPECT_NE(patched("schema_version", 2).find("model.schema_version = 2"), std::string::npos);
  EXPECT_NE(patched("q_heads", 3).find("kv_heads = 2: must divide q_heads = 3"), std::string::npos);
  EXPECT_NE(patched("name", "").find("model.name"), std::string::npos);
  EXPECT_NE(patched("layers", 0).find("model.layers = 0"), std::string::npos);
  try {
    resolve_model_shape("llama-8b");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kBadInput);
    EXPECT_NE(std::string(e.what()).find("model = 'llama-8b': neither a preset (llama3-8b"), std::string::npos);
  }
}

}  // namespace
}  // namespace fulcrum
