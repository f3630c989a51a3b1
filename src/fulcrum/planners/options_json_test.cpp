#include "fulcrum/planners/options_json.hpp"

#include "fulcrum/planners/planner.hpp"

#include <gtest/gtest.h>

namespace fulcrum {
namespace {

TEST(OptionsJson, ValuesAreSnakeCaseWithWholeOptionsAsIntegers) {
  PlannerOptions options;
  options.set("dcp-block", 512).set("tolerance", 0.05);
  const nlohmann::json json = planner_options_json(options);
  const auto specs = planner_option_specs();
  ASSERT_EQ(json.size(), specs.size());  // every registered option, set or not
  for (const auto& spec : specs) {
    std::string key(spec.name);
    for (char& c : key) c = c == '-' ? '_' : c;
    ASSERT_TRUE(json.contains(key)) << key;
    EXPECT_EQ(json[key].is_number_integer(), spec.whole()) << key;
    EXPECT_EQ(json[key].get<double>(), options.get(spec)) << key;
  }
  EXPECT_EQ(json["dcp_block"].dump(), "512");
  EXPECT_EQ(json["tolerance"].get<double>(), 0.05);
}

TEST(OptionsJson, SchemaDescribesEveryOptionByItsKind) {
  const nlohmann::json schema = planner_options_schema();
  const auto specs = planner_option_specs();
  ASSERT_EQ(schema["properties"].size(), specs.size());
  EXPECT_EQ(schema["required"].size(), specs.size());
  EXPECT_EQ(schema["additionalProperties"], false);
  const nlohmann::json values = planner_options_json(PlannerOptions{});
  for (const auto& spec : specs) {
    const nlohmann::json& p = schema["properties"][option_json_key(spec.name)];
    EXPECT_EQ(p["type"], spec.whole() ? "integer" : "number") << spec.name;
    EXPECT_EQ(p["default"], values[option_json_key(spec.name)]) << spec.name;
    EXPECT_EQ(p["description"], std::string(spec.help)) << spec.name;
    if (spec.kind == OptionKind::kFlag) {
      EXPECT_EQ(p["maximum"], 1) << spec.name;
    }
  }
  EXPECT_EQ(schema["properties"]["partial_kv"]["type"], "integer");
  EXPECT_EQ(schema["properties"]["tolerance"]["maximum"], 10.0);
}

}  // namespace
}  // namespace fulcrum
