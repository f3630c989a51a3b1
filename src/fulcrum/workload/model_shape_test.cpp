#include "fulcrum/workload/model_shape.hpp"

#include "fulcrum/core/error.hpp"

#include <gtest/gtest.h>

namespace fulcrum {
namespace {

TEST(ModelShape, PresetsMatchTheirPublishedConfigs) {
  const auto llama = model_shape_preset("llama3-8b");
  EXPECT_EQ(llama.layers, 32);
  EXPECT_EQ(llama.hidden, 4096);
  EXPECT_EQ(llama.q_heads, 32);
  EXPECT_EQ(llama.kv_heads, 8);
  EXPECT_EQ(llama.head_dim, 128);
  EXPECT_EQ(llama.ffn_hidden, 14336);
  const auto big = model_shape_preset("llama-34b");
  EXPECT_EQ(big.layers, 48);
  EXPECT_EQ(big.hidden, 8192);
  EXPECT_EQ(big.q_heads, 64);
  EXPECT_EQ(big.ffn_hidden, 22016);
  for (const auto& name : model_shape_preset_names()) EXPECT_NO_THROW(model_shape_preset(name).validate());
}

TEST(ModelShape, UnknownPresetNamesTheFieldAndChoices) {
  try {
    model_shape_preset("gpt-9");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model = 'gpt-9'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("llama3-8b"), std::string::npos);
  }
}

TEST(ModelShape, ValidateRejectsHeadsThatDoNotGroup) {
  auto shape = model_shape_preset("tiny");
  shape.kv_heads = 3;
  EXPECT_THROW(shape.validate(), Error);
  shape.kv_heads = 0;
  EXPECT_THROW(shape.validate(), Error);
}

}  // namespace
}  // namespace fulcrum
