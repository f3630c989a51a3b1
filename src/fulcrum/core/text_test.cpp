#include "fulcrum/core/text.hpp"

#include "fulcrum/core/error.hpp"

#include <gtest/gtest.h>

namespace fulcrum {
namespace {

TEST(SplitFields, KeepsEmptyFields) {
  EXPECT_EQ(split_fields("uniform:1:100", ':'), (std::vector<std::string_view>{"uniform", "1", "100"}));
  EXPECT_EQ(split_fields("a::b", ':'), (std::vector<std::string_view>{"a", "", "b"}));
  EXPECT_EQ(split_fields("causal", ':'), (std::vector<std::string_view>{"causal"}));
  EXPECT_EQ(split_fields("", ':'), (std::vector<std::string_view>{""}));
}

// Lists that select what runs key their results by name: a name twice is an error, not a second row.
TEST(SplitNames, SkipsEmptyFieldsAndRejectsANameGivenTwice) {
  EXPECT_EQ(split_names("distca,,wlb,", "planners"), (std::vector<std::string>{"distca", "wlb"}));
  EXPECT_TRUE(split_names("", "planners").empty());
  try {
    split_names("distca,wlb,distca", "planners");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kBadInput);
    EXPECT_STREQ(e.what(), "planners = 'distca,wlb,distca': 'distca' is named twice");
  }
}

}  // namespace
}  // namespace fulcrum
