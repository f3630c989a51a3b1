#include "fulcrum/cost/attention_cost.hpp"

#include "fulcrum/core/random.hpp"
#include "fulcrum/cost/model_cost.hpp"

#include <gtest/gtest.h>

#include <array>
#include <vector>

namespace fulcrum {
namespace {

TEST(AttentionCost, CausalFlopsEqualBruteForcePairCountsOnRandomRanges) {
  const auto model = model_shape_preset("llama3-8b");
  const auto mask = MaskSpec::causal();
  Rng rng(17);
  for (int trial = 0; trial < 500; ++trial) {
    const Tokens len = rng.uniform_int(1, 300);
    std::vector<Range> queries;
    const int n = static_cast<int>(rng.uniform_int(1, 2));
    for (int i = 0; i < n; ++i) {
      const Tokens b = rng.uniform_int(0, len - 1);
      queries.push_back({b, rng.uniform_int(b + 1, len)});
    }
    if (n == 2 && queries[1].begin < queries[0].end && queries[0].begin < queries[1].end) continue;  // overlap
    const Tokens kb = rng.uniform_int(0, len - 1);
    const Range keys{kb, rng.uniform_int(kb + 1, len)};
    Tokens brute = 0;
    for (const auto& q : queries) {
      for (Tokens row = q.begin; row < q.end; ++row) {
        for (Tokens k = keys.begin; k < keys.end; ++k) brute += (k <= row) ? 1 : 0;
      }
    }
    EXPECT_EQ(attention_pairs(mask, queries, keys, len), brute);
    EXPECT_DOUBLE_EQ(attention_forward_flops(model, mask, queries, keys, len),
                     static_cast<double>(brute) * 4.0 * 128 * 32);
  }
}

// Heads: a task's FLOPs count only its heads, each with its own mask's pairs; one run over all heads
// is exactly the all-head number.
TEST(AttentionCost, HeadRangeFlopsCountEachHeadUnderItsOwnMask) {
  const auto model = model_shape_preset("llama3-8b");  // 32 q heads of 128
  const Tokens len = 100;
  const std::array<Range, 1> rows = {Range{20, 60}};
  const Range keys{0, 80};
  std::vector<MaskSpec> per_head(32, MaskSpec::causal());
  for (int h = 8; h < 12; ++h) per_head[static_cast<std::size_t>(h)] = MaskSpec::sliding_window(5);
  per_head[31] = MaskSpec::full();
  const MaskSpec causal_mask = MaskSpec::causal();  // the runs point at it
  const Tokens causal = causal_mask.count_pairs(rows[0], keys, len);
  const Tokens window = MaskSpec::sliding_window(5).count_pairs(rows[0], keys, len);
  const Tokens full = MaskSpec::full().count_pairs(rows[0], keys, len);
  auto flops = [&](HeadRange heads) {
    return attention_forward_flops(model.head_dim, model.q_heads, mask_runs(causal_mask, per_head, heads), rows, keys,
                                   len);
  };
  EXPECT_EQ(mask_runs(causal_mask, per_head, {}).size(), 4u);  // causal, window, causal, full
  EXPECT_DOUBLE_EQ(flops({6, 10}), 4.0 * 128 * static_cast<double>(2 * causal + 2 * window));
  EXPECT_DOUBLE_EQ(flops({}), 4.0 * 128 * static_cast<double>(27 * causal + 4 * window + full));
  EXPECT_DOUBLE_EQ(flops({0, 8}) + flops({8, 32}), flops({}));
  // One mask: one run, bit for bit the all-head formula the planners use.
  const auto one = mask_runs(causal_mask, {}, {});
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(attention_forward_flops(model.head_dim, model.q_heads, one, rows, keys, len),
            attention_forward_flops(model, MaskSpec::causal(), rows, keys, len));
  EXPECT_DOUBLE_EQ(
      attention_forward_flops(model.head_dim, model.q_heads, mask_runs(causal_mask, {}, {4, 6}), rows, keys, len),
      4.0 * 128 * 2 * static_cast<double>(causal));
}

TEST(AttentionCost, TokenBytesAreGqaAndDtypeAware) {
  auto model = model_shape_preset("llama3-8b");
  auto bytes = token_bytes(model);
  EXPECT_DOUBLE_EQ(bytes.q, 2.0 * 32 * 128);
  EXPECT_DOUBLE_EQ(bytes.kv, 2.0 * 2 * 8 * 128);  // K and V, 8 kv heads
  EXPECT_DOUBLE_EQ(bytes.o, 2.0 * 32 * 128);
  EXPECT_DOUBLE_EQ(bytes.lse, 4.0 * 32);
  model.dtype_bytes = 4;
  EXPECT_DOUBLE_EQ(token_bytes(model).kv, 4.0 * 2 * 8 * 128);
}

TEST(ModelCost, LinearFlopsMatchAHandCount) {
  const auto m = model_shape_preset("llama3-8b");
  // QKV 4096 x (32 + 16) x 128, O 4096 x 4096, MLP 3 x 4096 x 14336, times 2 FLOPs per multiply-add.
  const double expected = 2.0 * (4096.0 * 48 * 128 + 4096.0 * 4096 + 3.0 * 4096 * 14336);
  EXPECT_DOUBLE_EQ(linear_forward_flops_per_token(m), expected);
  EXPECT_GT(activation_bytes_per_token(m), 0.0);
}

}  // namespace
}  // namespace fulcrum
