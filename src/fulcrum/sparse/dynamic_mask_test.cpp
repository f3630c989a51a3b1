#include "fulcrum/sparse/dynamic_mask.hpp"

#include "fulcrum/core/error.hpp"

#include <gtest/gtest.h>

#include <string>

namespace fulcrum::sparse {
namespace {

std::string bad_input(std::string_view text) {
  try {
    parse_dynamic_mask(text);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kBadInput);
    return e.what();
  }
  return "";
}

TEST(DynamicMask, ParsesGammaAndBlockAndNamesBadFields) {
  EXPECT_FALSE(parse_dynamic_mask("causal"));
  EXPECT_FALSE(parse_dynamic_mask("vslash:0:0"));
  const auto spec = parse_dynamic_mask("vslash-dynamic:0.95:128");
  ASSERT_TRUE(spec);
  EXPECT_DOUBLE_EQ(spec->gamma, 0.95);
  EXPECT_EQ(spec->block, 128);
  EXPECT_EQ(parse_dynamic_mask("vslash-dynamic:1")->block, 64);
  EXPECT_NE(bad_input("vslash-dynamic:0").find("mask gamma"), std::string::npos);
  EXPECT_NE(bad_input("vslash-dynamic:1.5").find("(0, 1]"), std::string::npos);
  EXPECT_NE(bad_input("vslash-dynamic:x").find("mask gamma"), std::string::npos);
  EXPECT_NE(bad_input("vslash-dynamic:0.9:0").find("mask block"), std::string::npos);
  EXPECT_NE(bad_input("vslash-dynamic").find("vslash-dynamic:GAMMA"), std::string::npos);
  EXPECT_TRUE(estimates(*spec, 128));
  EXPECT_FALSE(estimates(*spec, 127));  // shorter than a block: the document stays causal
}

// The mask of an index is the index's own definition (keeps), pair by pair, and the single-process
// estimate on synthetic data reaches the recall target on every head.
TEST(DynamicMask, SyntheticIndicesBecomeTheirVsblocksMasks) {
  const EstimatorShape shape{2, 1, 64};
  const DynamicMaskSpec spec{0.9, 64};
  const auto indices = synthetic_head_indices(5, 3, shape, 1024, spec);
  ASSERT_EQ(indices.size(), 2u);
  for (const auto& index : indices) {
    EXPECT_GE(index.recall, spec.gamma - 1e-9);
    const MaskSpec mask = to_mask(index);
    for (Tokens q = 0; q < 1024; q += 7) {
      for (Tokens k = 0; k < 1024; k += 5) EXPECT_EQ(mask.allows(q, k, 1024), keeps(index, q, k)) << q << " " << k;
    }
  }
  EXPECT_EQ(synthetic_head_indices(5, 3, shape, 1024, spec), indices);  // seeded: the same document, the same index
}

}  // namespace
}  // namespace fulcrum::sparse
