#include "fulcrum/workload/model_config.hpp"

#include "fulcrum/core/error.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace fulcrum {
namespace {

class ConfigFile {
 public:
  explicit ConfigFile(const std::string& text)
      : path_((std::filesystem::temp_directory_path() / "fulcrum-model-config-test" / "config.json").string()) {
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
  const ModelShape shape = model_shape_from_hf_config(file.path());
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
  const ModelShape shape = model_shape_from_hf_config(file.path());
  EXPECT_EQ(shape.kv_heads, 8);
  EXPECT_EQ(shape.head_dim, 32);
  EXPECT_EQ(shape.rms_norm_eps, 1e-6);
  EXPECT_EQ(shape.rope_theta, 10000);
}

std::string error_of(const std::string& text) {
  const ConfigFile file(text);
  try {
    model_shape_from_hf_config(file.path());
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kBadInput);
    EXPECT_NE(std::string(e.what()).find(file.path()), std::string::npos) << e.what();
    return e.what();
  }
  return "";
}

TEST(ModelConfig, BadFieldsAreNamed) {
  const std::string base = R"("intermediate_size": 512, "num_attention_heads": 8, "num_hidden_layers": 2)";
  EXPECT_NE(error_of("{" + base + "}").find("config.hidden_size: missing"), std::string::npos)
      << error_of("{" + base + "}");
  EXPECT_NE(error_of(R"({"hidden_size": 0, )" + base + "}").find("config.hidden_size = 0"), std::string::npos);
  EXPECT_NE(error_of(R"({"hidden_size": 256.5, )" + base + "}").find("config.hidden_size"), std::string::npos);
  EXPECT_NE(error_of(R"({"hidden_size": 256, "num_key_value_heads": 3, )" + base + "}")
                .find("config.num_key_value_heads = 3"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"hidden_size": 250, )" + base + "}").find("config.hidden_size = 250"), std::string::npos);
  EXPECT_NE(error_of(R"({"hidden_size": 256, "rms_norm_eps": -1, )" + base + "}").find("config.rms_norm_eps"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"hidden_size": 256, "rope_theta": "big", )" + base + "}").find("config.rope_theta"),
            std::string::npos);
  EXPECT_NE(error_of("{not json").find("not JSON"), std::string::npos);
  try {
    model_shape_from_hf_config("/nonexistent/config.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/config.json"), std::string::npos);
  }
}

}  // namespace
}  // namespace fulcrum
