#include "fulcrum/cost/attention_cost.hpp"

#include "fulcrum/core/random.hpp"
#include "fulcrum/cost/model_cost.hpp"

#include <gtest/gtest.h>

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
