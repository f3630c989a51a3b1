// The head profile's shape and contract (not its speed: no timing is asserted beyond "measured, > 0"): one
// series per pattern key and grid length, t_qkvo >= t_qo, readable by the cost model it is written for.
#include "fulcrum/prefill/head_profile.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/core/json_reader.hpp"
#include "fulcrum/planners/heads/scenarios.hpp"
#include "fulcrum/prefill/test_model.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace fulcrum::prefill {
namespace {

TEST(HeadProfile, MeasuresEveryKeyAtEveryLengthAndFeedsTheCostModel) {
  const ModelShape shape = testing::test_model();
  const auto report = heads::builtin_head_patterns("mixed", shape, 64);
  HeadProfileConfig config;
  config.head_dim = shape.head_dim;
  config.hidden = shape.hidden;
  config.prompt_tokens = {32, 64};
  config.patterns = profiled_patterns(report, shape.layers);
  config.repeats = 1;
  config.threads = 1;
  ASSERT_EQ(config.patterns.size(), 4U);  // full first, then the a-shape, vertical-slash and block-sparse keys
  EXPECT_EQ(config.patterns.front(), heads::HeadPattern::full());
  int calls = 0;
  const heads::RuntimeProfile profile = profile_heads(config, [&](int done, int total) {
    EXPECT_EQ(done, ++calls);
    EXPECT_EQ(total, 2 * 5);
  });
  EXPECT_EQ(calls, 10);
  EXPECT_EQ(profile.prompt_tokens, config.prompt_tokens);
  ASSERT_EQ(profile.attention_s.size(), 4U);
  for (const auto& p : config.patterns) {
    const auto& series = profile.attention_s.at(p.key());
    ASSERT_EQ(series.size(), 2U) << p.key();
    for (double t : series) EXPECT_GT(t, 0) << p.key();
  }
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_GT(profile.qo_s[i], 0);
    EXPECT_GE(profile.qkvo_s[i], profile.qo_s[i]);
  }
  // What it writes is what the cost model reads, for every layer of the report, at and between grid points.
  const JsonDocument doc(profile.to_json(), "profile.json", "profile");
  heads::HeadCostModel model;
  model.profile = heads::RuntimeProfile::from_json(doc.root());
  for (Tokens t : {32, 48, 64}) {
    for (const auto& layer : report.layers) EXPECT_NO_THROW(model.layer(layer, shape.kv_heads, t));
  }
  EXPECT_THROW(model.layer(report.layers[0], shape.kv_heads, 65), Error);  // outside the grid
}

TEST(HeadProfile, BadInputNamesTheField) {
  auto message = [](const HeadProfileConfig& c) {
    try {
      c.validate();
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kBadInput);
      return std::string(e.what());
    }
    return std::string();
  };
  HeadProfileConfig good;
  good.prompt_tokens = {16, 32};
  good.patterns = {heads::HeadPattern::full()};
  EXPECT_EQ(message(good), "");
  auto c = good;
  c.prompt_tokens = {32, 16};
  EXPECT_NE(message(c).find("prompt tokens[1] = 16"), std::string::npos);
  c = good;
  c.prompt_tokens = {};
  EXPECT_NE(message(c).find("prompt tokens"), std::string::npos);
  c = good;
  c.repeats = 0;
  EXPECT_NE(message(c).find("repeats = 0"), std::string::npos);
  c = good;
  c.patterns = {};
  EXPECT_NE(message(c).find("patterns"), std::string::npos);
  c = good;
  c.head_dim = 0;
  EXPECT_NE(message(c).find("head_dim = 0"), std::string::npos);
}

}  // namespace
}  // namespace fulcrum::prefill
