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

// Every option a planner declares is read when it plans, and it reads no option it does not declare (its
// --help would not list it): an option declared and never read, or read under another planner's name, fails.
TEST(PlannerRegistry, EachPlannerReadsExactlyTheOptionsItDeclares) {
  for (const auto& r : planner_registry()) {
    PlannerOptions options;
    options.model = model_shape_preset("tiny");
    options.set("cp-degree", 2);  // planners with CP groups plan the 4 ranks as two groups
    options.record_reads();
    const auto planner = make_planner(r.name, options);
    const Tokens length = std::max<Tokens>(1024, planner->document_length_multiple(4));
    const Batch batch = batch_from_rank_layout({{length}, {length}, {length}, {length}}, length, MaskSpec::causal());
    (void)planner->plan(batch);
    std::set<std::string> declared;
    for (const auto& o : r.options) declared.emplace(o.name);
    EXPECT_EQ(options.options_read(), declared) << r.name;
  }
}

TEST(PlannerRegistry, OptionKindsCheckTheirValues) {
  const OptionSpec& flag = find_planner_option("partial-kv");
  EXPECT_EQ(flag.kind, OptionKind::kFlag);
  EXPECT_EQ(flag.range_text(), "0 (off) or 1 (on)");
  EXPECT_NO_THROW(flag.check(0));
  EXPECT_NO_THROW(flag.check(1));
  EXPECT_THROW(flag.check(0.5), Error);
  EXPECT_THROW(flag.check(2), Error);
  PlannerOptions o;
  EXPECT_FALSE(o.get_flag(flag));
  EXPECT_TRUE(o.set("partial-kv", 1).get_flag(flag));
  EXPECT_THROW((void)o.get_flag(find_planner_option("tolerance")), Error);  // not a flag: an internal error
  EXPECT_THROW(find_planner_option("dcp-divisions").check(2.5), Error);
  for (const auto& spec : planner_option_specs()) {
    if (spec.kind == OptionKind::kFlag) {
      EXPECT_TRUE(spec.default_value == 0 || spec.default_value == 1) << spec.name;
    }
  }
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
