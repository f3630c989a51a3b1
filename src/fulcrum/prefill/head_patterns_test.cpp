#include "fulcrum/prefill/head_patterns.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/workload/head_masks.hpp"

#include <gtest/gtest.h>

namespace fulcrum::prefill {
namespace {

TEST(HeadPatterns, MixedCyclesTheFourKindsOverHeadsShiftedPerLayer) {
  const auto shape = model_shape_preset("small-gqa");
  const auto masks = head_patterns("mixed", shape, 512);
  ASSERT_EQ(masks.size(), static_cast<std::size_t>(shape.layers));
  const MaskKind kinds[] = {MaskKind::kCausal, MaskKind::kLambda, MaskKind::kVerticalSlash, MaskKind::kBlockSparse};
  for (std::size_t l = 0; l < masks.size(); ++l) {
    ASSERT_EQ(masks[l].size(), static_cast<std::size_t>(shape.q_heads));
    for (std::size_t h = 0; h < masks[l].size(); ++h) EXPECT_EQ(masks[l][h].kind, kinds[(h + l) % 4]);
  }
  EXPECT_EQ(masks[0][1].sink, 16);
  EXPECT_EQ(masks[0][1].window, 64);
  const auto full = head_patterns("full", shape, 512);
  for (const auto& m : full[2]) EXPECT_EQ(m.kind, MaskKind::kCausal);
}

TEST(HeadPatterns, EveryKindIsValidAndSparserThanCausalForAnyLength) {
  for (Tokens t : {1, 2, 7, 80, 300, 4096}) {
    const double causal = static_cast<double>(MaskSpec::causal().document_pairs(t));
    for (int kind = 0; kind < 4; ++kind) {
      const MaskSpec m = pattern_mask(kind, t);
      EXPECT_NO_THROW(check_mask_reach(m, t, "mask")) << kind << " " << t;
      EXPECT_NO_THROW(m.check_length(t));
      const double pairs = static_cast<double>(m.document_pairs(t));
      EXPECT_GT(pairs, 0);
      EXPECT_LE(pairs, causal);
      if (kind > 0 && t >= 4096) {
        EXPECT_LT(pairs, 0.6 * causal) << kind << " " << t;
      }
    }
  }
  EXPECT_THROW(head_patterns("sparse", model_shape_preset("tiny"), 64), Error);
}

}  // namespace
}  // namespace fulcrum::prefill
