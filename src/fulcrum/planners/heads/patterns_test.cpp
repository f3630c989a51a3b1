#include "fulcrum/planners/heads/patterns.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/planners/heads/scenarios.hpp"
#include "fulcrum/workload/head_masks.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <set>

namespace fulcrum::heads {
namespace {

std::vector<HeadPattern> every_kind() {
  return {HeadPattern::full(), HeadPattern::a_shape(128, 4096), HeadPattern::vertical_slash(1000, 6096),
          HeadPattern::block_sparse_blocks(64, 100), HeadPattern::block_sparse_density(64, 0.1)};
}

nlohmann::json small_report() {
  return nlohmann::json::parse(R"({
    "model": "tiny", "q_heads": 4, "kv_heads": 2,
    "layers": [
      {"heads": [{"kind": "full"}, {"kind": "a-shape", "sink": 4, "window": 64},
                 {"kind": "vertical-slash", "verticals": 3, "slashes": 5},
                 {"kind": "block-sparse", "block": 16, "blocks": 2}]},
      {"heads": [{"kind": "block-sparse", "block": 16, "density": 0.5}, {"kind": "full"}, {"kind": "full"},
                 {"kind": "full"}]}]})");
}

// The bad-input message of reading `json`, or "" when it reads.
std::string error_of(const nlohmann::json& json) {
  try {
    head_patterns_from_json(json, "p.json");
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kBadInput) << e.what();
    return e.what();
  }
  return "";
}

TEST(HeadPatterns, KeysRoundTripAndDifferByParameters) {
  std::set<std::string> keys;
  for (const HeadPattern& p : every_kind()) {
    EXPECT_EQ(HeadPattern::parse(p.key()), p) << p.key();
    EXPECT_TRUE(keys.insert(p.key()).second) << p.key();
  }
  EXPECT_EQ(HeadPattern::vertical_slash(30, 800).key(), "vertical-slash:30:800");
  EXPECT_NE(HeadPattern::vertical_slash(30, 800).key(), HeadPattern::vertical_slash(100, 800).key());
  EXPECT_EQ(HeadPattern::block_sparse_density(64, 0.1).key(), "block-sparse:64:density=0.1");
  EXPECT_THROW(HeadPattern::parse("a-shape:128"), Error);
  EXPECT_THROW(HeadPattern::parse("diagonal"), Error);
  EXPECT_THROW(HeadPattern::parse("block-sparse:64:top=3"), Error);
  EXPECT_THROW(HeadPattern::parse("a-shape:128:0"), Error);
}

TEST(HeadPatterns, ReportRoundTripsThroughJson) {
  const HeadPatternReport r = head_patterns_from_json(small_report());
  ASSERT_EQ(r.layers.size(), 2u);
  EXPECT_EQ(r.q_heads, 4);
  EXPECT_EQ(r.kv_heads, 2);
  EXPECT_EQ(r.layers[0][1], HeadPattern::a_shape(4, 64));
  EXPECT_EQ(r.layers[0][3], HeadPattern::block_sparse_blocks(16, 2));
  EXPECT_EQ(r.layers[1][0], HeadPattern::block_sparse_density(16, 0.5));
  const HeadPatternReport again = head_patterns_from_json(to_json(r));
  EXPECT_EQ(again.layers, r.layers);
  EXPECT_EQ(again.model, "tiny");
  EXPECT_NO_THROW(r.check_model(ModelShape{"t", 1, 64, 4, 2, 16, 64, 2}));
  EXPECT_THROW(r.check_model(model_shape_preset("llama3-8b")), Error);
  try {
    r.check_model(ModelShape{"t", 3, 64, 4, 2, 16, 64, 2});  // 3 layers, the report has 2
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("patterns.layers = 2 layers: must be at least model t's layers = 3"),
              std::string::npos)
        << e.what();
  }
}

TEST(HeadPatterns, BadInputNamesTheFieldAndRange) {
  auto with = [](const char* pointer, nlohmann::json value) {
    nlohmann::json j = small_report();
    j[nlohmann::json::json_pointer(pointer)] = std::move(value);
    return j;
  };
  EXPECT_NE(error_of(with("/layers/1/heads/3/kind", "diagonal"))
                .find("p.json: patterns.layers[1].heads[3].kind = "
                      "'diagonal': unknown; choose from full, a-shape"),
            std::string::npos);
  EXPECT_NE(error_of(with("/layers/0/heads/1/window", 0))
                .find("patterns.layers[0].heads[1].window = 0: must be in [1, "
                      "16777216]"),
            std::string::npos);
  EXPECT_NE(error_of(with("/layers/0/heads/2/slashes", -3)).find("patterns.layers[0].heads[2].slashes"),
            std::string::npos);
  EXPECT_NE(error_of(with("/layers/1/heads/0/density", 1.5)).find("patterns.layers[1].heads[0].density = 1.5"),
            std::string::npos);
  EXPECT_NE(error_of(with("/layers/1/heads/0/blocks", 3)).find("exactly one of blocks and density"), std::string::npos);
  EXPECT_NE(error_of(with("/layers/0/heads/0/window", 3)).find("patterns.layers[0].heads[0].window: unknown field"),
            std::string::npos);
  EXPECT_NE(error_of(with("/kv_heads", 3)).find("patterns.kv_heads = 3: must be a divisor of q_heads = 4"),
            std::string::npos);
  nlohmann::json short_layer = small_report();
  short_layer["layers"][1]["heads"].erase(0);
  EXPECT_NE(error_of(short_layer).find("patterns.layers[1].heads"), std::string::npos);
  EXPECT_NE(error_of(short_layer).find("q_heads = 4"), std::string::npos);
  EXPECT_NE(error_of(with("/layers", nlohmann::json::array())).find("patterns.layers"), std::string::npos);
}

TEST(HeadPatterns, MasksAreTheNamedKinds) {
  EXPECT_EQ(to_mask(HeadPattern::full(), 100, 1), MaskSpec::causal());
  EXPECT_EQ(to_mask(HeadPattern::a_shape(4, 16), 100, 1), MaskSpec::lambda(4, 16));
  EXPECT_EQ(to_mask(HeadPattern::vertical_slash(4, 6), 100, 1).kind, MaskKind::kVerticalSlash);
  EXPECT_EQ(to_mask(HeadPattern::block_sparse_blocks(8, 3), 100, 1).kind, MaskKind::kBlockSparse);
}

TEST(HeadPatterns, VerticalSlashTakesHalfNearHalfScatteredWithinTheBudget) {
  const Tokens len = 1000;
  const MaskSpec m = to_mask(HeadPattern::vertical_slash(10, 21), len, 7);
  const auto& v = m.lists->verticals;
  const auto& s = m.lists->slashes;
  ASSERT_EQ(v.size(), 10u);
  ASSERT_EQ(s.size(), 21u);
  for (Tokens i = 0; i < 5; ++i) EXPECT_EQ(v[static_cast<std::size_t>(i)], i);
  for (Tokens i = 0; i < 11; ++i) EXPECT_EQ(s[static_cast<std::size_t>(i)], i);
  EXPECT_GT(v.back(), 5);  // scattered, not the next columns (probability of failure ~ 1e-12)
  EXPECT_LT(v.back(), len);
  // Every row sees itself (slash 0), so no row of a head is empty.
  for (Tokens q = 0; q < len; ++q) ASSERT_TRUE(m.allows(q, q, len));
  // Seeded: same seed, same mask; another seed, another.
  EXPECT_EQ(to_mask(HeadPattern::vertical_slash(10, 21), len, 7), m);
  EXPECT_NE(to_mask(HeadPattern::vertical_slash(10, 21), len, 8), m);
  // Budgets past the prompt are cut to it: every column and every diagonal, i.e. all causal pairs.
  const MaskSpec all = to_mask(HeadPattern::vertical_slash(500, 500), 40, 3);
  EXPECT_EQ(all.document_pairs(40), 40 * 41 / 2);
}

TEST(HeadPatterns, BlockSparseKeepsTheDiagonalTheSinkAndTheBudgetPerRow) {
  const Tokens len = 64 * 40;
  const MaskSpec m = to_mask(HeadPattern::block_sparse_blocks(64, 5), len, 3);
  std::vector<int> per_row(40, 0);
  std::set<std::pair<Tokens, Tokens>> seen;
  for (const auto& [qb, kb] : m.lists->block_pairs) {
    EXPECT_LE(kb, qb);
    EXPECT_TRUE(seen.insert({qb, kb}).second);
    ++per_row[static_cast<std::size_t>(qb)];
  }
  for (Tokens i = 0; i < 40; ++i) {
    EXPECT_EQ(per_row[static_cast<std::size_t>(i)], std::min<Tokens>(i + 1, 5)) << i;
    EXPECT_TRUE(seen.count({i, i})) << i;
    EXPECT_TRUE(seen.count({i, 0})) << i;
  }
  EXPECT_EQ(to_mask(HeadPattern::block_sparse_blocks(64, 5), len, 3), m);
  // Density: about that share of the causal pairs (rows keep round(density x causal blocks)).
  const Tokens big = 64 * 400;
  const double pairs =
      static_cast<double>(to_mask(HeadPattern::block_sparse_density(64, 0.25), big, 1).document_pairs(big));
  const double causal = static_cast<double>(big) * static_cast<double>(big + 1) / 2;
  EXPECT_NEAR(pairs / causal, 0.25, 0.01);
}

TEST(HeadPatterns, HeadSeedsDifferPerHeadAndLayer) {
  std::set<std::uint64_t> seeds;
  for (int layer = 0; layer < 4; ++layer) {
    for (int head = 0; head < 8; ++head) seeds.insert(head_mask_seed(1, layer, head));
  }
  EXPECT_EQ(seeds.size(), 32u);
}

TEST(HeadPatterns, ReportMasksAreToMaskWithTheHeadSeeds) {
  const HeadPatternReport r = head_patterns_from_json(small_report());
  const auto masks = report_masks(r, 1, 100, 9);  // the first layer only
  ASSERT_EQ(masks.size(), 1u);
  ASSERT_EQ(masks[0].size(), 4u);
  for (int h = 0; h < 4; ++h) {
    EXPECT_EQ(masks[0][static_cast<std::size_t>(h)],
              to_mask(r.layers[0][static_cast<std::size_t>(h)], 100, head_mask_seed(9, 0, h)));
  }
}

TEST(HeadBuiltins, MixedCyclesTheFourKindsOverHeadsShiftedPerLayer) {
  const ModelShape shape = model_shape_preset("small-gqa");
  const HeadPatternReport mixed = load_head_patterns("mixed", shape, 512);
  ASSERT_EQ(mixed.layers.size(), static_cast<std::size_t>(shape.layers));
  EXPECT_EQ(mixed.q_heads, shape.q_heads);
  EXPECT_EQ(mixed.kv_heads, shape.kv_heads);
  const PatternKind kinds[] = {PatternKind::kFull, PatternKind::kAShape, PatternKind::kVerticalSlash,
                               PatternKind::kBlockSparse};
  for (std::size_t l = 0; l < mixed.layers.size(); ++l) {
    ASSERT_EQ(mixed.layers[l].size(), static_cast<std::size_t>(shape.q_heads));
    for (std::size_t h = 0; h < mixed.layers[l].size(); ++h) EXPECT_EQ(mixed.layers[l][h].kind, kinds[(h + l) % 4]);
  }
  EXPECT_EQ(mixed.layers[0][1], HeadPattern::a_shape(16, 64));
  EXPECT_EQ(mixed.layers[0][2], HeadPattern::vertical_slash(64, 32));
  EXPECT_EQ(mixed.layers[0][3], HeadPattern::block_sparse_blocks(64, 4));
  const HeadPatternReport full = load_head_patterns("full", shape, 512);
  for (const auto& p : full.layers[2]) EXPECT_EQ(p, HeadPattern::full());
  EXPECT_FALSE(is_builtin_head_patterns("sparse"));
}

TEST(HeadBuiltins, EveryMixedMaskFitsThePromptAndIsSparserThanCausal) {
  const ModelShape shape = model_shape_preset("tiny");  // 4 heads: each layer has every kind
  for (Tokens t : {1, 2, 7, 80, 300, 4096}) {
    const auto masks = report_masks(builtin_head_patterns("mixed", shape, t), shape.layers, t, 1);
    const double causal = static_cast<double>(MaskSpec::causal().document_pairs(t));
    for (const auto& m : masks[0]) {
      EXPECT_NO_THROW(check_mask_reach(m, t, "mask")) << t;
      EXPECT_NO_THROW(m.check_length(t)) << t;
      const double pairs = static_cast<double>(m.document_pairs(t));
      EXPECT_GT(pairs, 0);
      EXPECT_LE(pairs, causal);
      if (m.kind != MaskKind::kCausal && t >= 4096) {
        EXPECT_LT(pairs, 0.6 * causal) << t;
      }
    }
  }
}

TEST(HeadBuiltins, AReportFileMustMatchTheModel) {
  const std::string path = ::testing::TempDir() + "heads_builtin_report.json";
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    const std::string text = small_report().dump();
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
  }
  EXPECT_EQ(load_head_patterns(path, ModelShape{"t", 2, 64, 4, 2, 16, 64, 2}, 64).layers.size(), 2u);
  try {
    load_head_patterns(path, model_shape_preset("small-gqa"), 64);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kBadInput);
    EXPECT_NE(std::string(e.what()).find("patterns.q_heads = 4: must equal model small-gqa's q_heads = 16"),
              std::string::npos)
        << e.what();
  }
  std::remove(path.c_str());
}

TEST(HeadScenarios, MatchThePublishedTable) {
  const std::vector<std::pair<int, int>> shape = {{2, 16}, {2, 16}, {2, 16}, {4, 32}, {4, 32},
                                                  {4, 36}, {4, 32}, {4, 32}, {4, 72}, {8, 72}};
  const auto names = scenario_names();
  ASSERT_EQ(names.size(), 10u);
  for (std::size_t i = 0; i < names.size(); ++i) {
    const Scenario s = scenario(names[i], 1);
    EXPECT_EQ(s.devices, shape[i].first) << names[i];
    EXPECT_EQ(static_cast<int>(s.heads.size()), shape[i].second) << names[i];
    EXPECT_EQ(s.kv_heads * kScenarioGroupSize, shape[i].second);
    EXPECT_EQ(scenario(names[i], 1).heads, s.heads) << "seeded";
  }
  const Scenario s1 = scenario("S1", 0);
  for (int h = 0; h < 16; ++h) {
    EXPECT_EQ(s1.heads[static_cast<std::size_t>(h)], scenario_pattern(h < 8 ? 'F' : 'A'));
  }
  const Scenario s6 = scenario("S6", 0);
  EXPECT_EQ(s6.heads[4], scenario_pattern('V'));
  // S8 draws F and A only; S9 never F.
  for (const auto& p : scenario("S8", 5).heads)
    EXPECT_TRUE(p.kind == PatternKind::kFull || p.kind == PatternKind::kAShape);
  for (const auto& p : scenario("S9", 5).heads) EXPECT_NE(p.kind, PatternKind::kFull);
  EXPECT_NE(scenario("S10", 1).heads, scenario("S10", 2).heads);
  try {
    scenario("S11", 0);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("scenario = 'S11': unknown; choose from S1"), std::string::npos);
  }
}

}  // namespace
}  // namespace fulcrum::heads
