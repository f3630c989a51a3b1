#include "fulcrum/core/text.hpp"

#include <gtest/gtest.h>

namespace fulcrum {
namespace {

TEST(SplitFields, KeepsEmptyFields) {
  EXPECT_EQ(split_fields("uniform:1:100", ':'), (std::vector<std::string_view>{"uniform", "1", "100"}));
  EXPECT_EQ(split_fields("a::b", ':'), (std::vector<std::string_view>{"a", "", "b"}));
  EXPECT_EQ(split_fields("causal", ':'), (std::vector<std::string_view>{"causal"}));
  EXPECT_EQ(split_fields("", ':'), (std::vector<std::string_view>{""}));
}

}  // namespace
}  // namespace fulcrum
