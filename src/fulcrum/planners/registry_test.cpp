#include "fulcrum/core/error.hpp"
#include "fulcrum/planners/planner.hpp"

#include <gtest/gtest.h>

#include <set>

namespace fulcrum {
namespace {

TEST(PlannerRegistry, EveryRegistrationIsComplete) {
  std::set<std::string> names;
  for (const auto& r : planner_registry()) {
    EXPECT_TRUE(names.insert(std::string(r.name)).second) << "duplicate " << r.name;
    EXPECT_FALSE(r.summary.empty()) << r.name;
    EXPECT_FALSE(r.capabilities.masks.empty()) << r.name;
    PlannerOptions options;
    options.model = model_shape_preset("tiny");
    const auto planner = make_planner(r.name, options);
    EXPECT_EQ(planner->name(), r.name);
    EXPECT_EQ(&planner->capabilities(), &r.capabilities);
  }
  EXPECT_EQ(planner_names().size(), planner_registry().size());
}

TEST(PlannerRegistry, MetaPlannersAreSelectableButNotMade) {
  ASSERT_FALSE(meta_planner_registry().empty());
  std::set<std::string> names;
  for (const auto& name : planner_names()) names.insert(name);
  for (const auto& meta : meta_planner_registry()) {
    EXPECT_TRUE(names.insert(std::string(meta.name)).second) << "a meta-planner shares a planner's name: " << meta.name;
    EXPECT_FALSE(meta.summary.empty()) << meta.name;
    EXPECT_FALSE(meta.candidates_help.empty()) << meta.name;
    EXPECT_TRUE(is_meta_planner(meta.name));
    EXPECT_NO_THROW(check_selectable_planner(meta.name));
    // It plans through the simulator (sim::choose_plan): make_planner says so instead of making a stub.
    try {
      (void)make_planner(meta.name, PlannerOptions{});
      FAIL() << meta.name;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kBadInput);
      EXPECT_NE(std::string(e.what()).find("meta-planner"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(selectable_planner_names().size(), names.size());
  for (const auto& name : planner_names()) EXPECT_FALSE(is_meta_planner(name)) << name;
  EXPECT_TRUE(is_meta_planner("auto"));
  EXPECT_TRUE(names_meta_planner({"distca", "auto"}));
  EXPECT_FALSE(names_meta_planner({"distca", "packed"}));
  try {
    check_selectable_planner("nope");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("auto"), std::string::npos) << "the choices name the meta-planners too";
  }
}

TEST(PlannerRegistry, OptionsAreDeclaredOnceWithSaneDefaults) {
  std::set<std::string> names;
  for (const auto& spec : planner_option_specs()) {
    EXPECT_TRUE(names.insert(std::string(spec.name)).second) << spec.name;
    EXPECT_NO_THROW(spec.check(spec.default_value)) << spec.name;
    EXPECT_EQ(&find_planner_option(spec.name), &find_planner_option(spec.name));
    EXPECT_FALSE(spec.help.empty()) << spec.name;
  }
  // cp-degree is read by two planners and listed once.
  EXPECT_EQ(names.count("cp-degree"), 1u);
  int readers = 0;
  for (const auto& r : planner_registry()) {
    for (const auto& o : r.options) readers += o.name == "cp-degree";
  }
  EXPECT_EQ(readers, 2);
}

TEST(PlannerRegistry, OptionsKeepTheirValues) {
  PlannerOptions o;
  const OptionSpec& block = find_planner_option("dcp-block");
  EXPECT_EQ(o.get(block), block.default_value);
  o.set("dcp-block", 256);
  EXPECT_EQ(o.get_tokens(block), 256);
  EXPECT_EQ(o.values().size(), 1u);
  EXPECT_EQ(block.range_text(), "a whole number in [1, 16777216]");
  EXPECT_EQ(find_planner_option("tolerance").range_text(), "in [0, 10]");
  EXPECT_EQ(find_planner_option("granularity").range_text(),
            "a whole number in [1, 16777216], at most tokens-per-rank");
}

TEST(PlannerRegistry, UnknownPlannerNamesTheChoices) {
  try {
    make_planner("ring-attention", PlannerOptions{});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kBadInput);
    EXPECT_NE(std::string(e.what()).find("planner = 'ring-attention': unknown; choose from distca, dcp"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace fulcrum
