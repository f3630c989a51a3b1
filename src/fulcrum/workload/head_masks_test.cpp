#include "fulcrum/workload/head_masks.hpp"

#include "fulcrum/core/error.hpp"

#include <gtest/gtest.h>

#include <string>

namespace fulcrum {
namespace {

std::string reach_error(const MaskSpec& mask, Tokens longest) {
  try {
    check_mask_reach(mask, longest, "mask");
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kBadInput);
    return e.what();
  }
  return "";
}

TEST(CheckMaskReach, NamesAColumnOffsetOrBlockPastTheLongestDocument) {
  EXPECT_EQ(reach_error(MaskSpec::vertical_slash({0, 99}, {0, 50}), 100), "");
  EXPECT_NE(reach_error(MaskSpec::vertical_slash({0, 100}, {0}), 100).find("mask vertical = 100: past the sequence"),
            std::string::npos);
  EXPECT_NE(reach_error(MaskSpec::vertical_slash({0}, {0, 120}), 100).find("mask slash = 120"), std::string::npos);
  // vsblocks: block offset d reaches token d x G.
  EXPECT_EQ(reach_error(MaskSpec::vertical_slash_blocks(64, {0}, {0, 1}), 128), "");
  EXPECT_NE(reach_error(MaskSpec::vertical_slash_blocks(64, {0}, {0, 2}), 128).find("mask block offset = 2"),
            std::string::npos);
  EXPECT_NE(reach_error(MaskSpec::block_sparse(64, {{0, 0}, {3, 1}}), 128).find("mask block = 3"), std::string::npos);
  EXPECT_EQ(reach_error(MaskSpec::causal(), 1), "");  // band masks reach any length
}

}  // namespace
}  // namespace fulcrum
