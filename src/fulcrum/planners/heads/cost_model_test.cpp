#include "fulcrum/planners/heads/cost_model.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/core/random.hpp"
#include "fulcrum/planners/heads/loads.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>

namespace fulcrum::heads {
namespace {

LayerCosts small_layer() {
  LayerCosts c;
  c.attention_s = {5, 1, 2, 3};
  c.group_size = 2;
  c.qkvo_s = 0.5;
  c.qo_s = 0.25;
  return c;
}

// Every assignment of `costs` to `devices`, by counting in base `devices`.
template <class Visit>
void for_each_assignment(const LayerCosts& costs, int devices, Visit visit) {
  HeadAssignment a(static_cast<std::size_t>(costs.heads()), 0);
  while (true) {
    visit(a);
    std::size_t i = 0;
    while (i < a.size() && ++a[i] == devices) a[i++] = 0;
    if (i == a.size()) return;
  }
}

std::string error_of(auto&& call) {
  try {
    call();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kBadInput) << e.what();
    return e.what();
  }
  return "";
}

TEST(HeadCostModel, TheFirstHeadOfAGroupOnADevicePaysItsKvProjection) {
  const LayerCosts c = small_layer();
  // Device 0: head 0 (group 0, first), head 2 (group 1, first), head 3 (group 1, second); device 1: head 1.
  const DeviceTimes t = device_times(c, std::vector<int>{0, 1, 0, 0}, 2);
  EXPECT_DOUBLE_EQ(t.compute_s[0], (5 + 0.5) + (2 + 0.5) + (3 + 0.25));
  EXPECT_DOUBLE_EQ(t.compute_s[1], 1 + 0.5);
  EXPECT_DOUBLE_EQ(t.layer_s(), 11.25);
  EXPECT_DOUBLE_EQ(t.spread(), (11.25 - 1.5) / 11.25);
  // Keeping group 0 together saves head 1 its K/V projection.
  EXPECT_DOUBLE_EQ(device_times(c, std::vector<int>{0, 0, 1, 1}, 2).compute_s[0], 5.5 + 1.25);
}

TEST(HeadCostModel, OffloadCountsOnlyWhereLongerThanCompute) {
  LayerCosts c = small_layer();
  c.offload_per_group_s = 4;
  const DeviceTimes t = device_times(c, std::vector<int>{0, 1, 0, 0}, 2);
  EXPECT_DOUBLE_EQ(t.time_s[0], 11.25);  // 2 groups x 4 s hidden under 11.25 s of compute
  EXPECT_DOUBLE_EQ(t.offload_s[0], 8);
  EXPECT_DOUBLE_EQ(t.time_s[1], 4);  // 1 group: 4 s of copy outlast 1.5 s of compute
}

TEST(HeadCostModel, LoadsAgreeWithDeviceTimes) {
  Rng rng(3);
  for (int trial = 0; trial < 50; ++trial) {
    LayerCosts c;
    c.group_size = static_cast<int>(rng.uniform_int(1, 3));
    const int heads = c.group_size * static_cast<int>(rng.uniform_int(1, 4));
    for (int h = 0; h < heads; ++h) c.attention_s.push_back(rng.uniform());
    c.qo_s = rng.uniform() * 0.2;
    c.qkvo_s = c.qo_s + rng.uniform() * 0.2;
    c.offload_per_group_s = trial % 2 ? rng.uniform() : 0;
    const int devices = static_cast<int>(rng.uniform_int(1, 3));
    HeadAssignment a;
    for (int h = 0; h < heads; ++h) a.push_back(static_cast<int>(rng.uniform_int(0, devices - 1)));
    Loads loads(c, devices, a);
    // Move some heads around and back in a different order: the loads follow.
    for (int step = 0; step < 10; ++step) {
      const int h = static_cast<int>(rng.uniform_int(0, heads - 1));
      const int to = static_cast<int>(rng.uniform_int(0, devices - 1));
      loads.remove(h, a[static_cast<std::size_t>(h)]);
      loads.add(h, to);
      a[static_cast<std::size_t>(h)] = to;
    }
    const DeviceTimes t = device_times(c, a, devices);
    for (int d = 0; d < devices; ++d) {
      EXPECT_NEAR(loads.time(d), t.time_s[static_cast<std::size_t>(d)], 1e-12);
      EXPECT_NEAR(loads.compute(d), t.compute_s[static_cast<std::size_t>(d)], 1e-12);
    }
    EXPECT_NEAR(loads.max_time(), t.layer_s(), 1e-12);
  }
}

TEST(HeadCostModel, LowerBoundsAreLowerBoundsOfTheExhaustiveOptimum) {
  Rng rng(11);
  int tight = 0;
  for (int trial = 0; trial < 60; ++trial) {
    LayerCosts c;
    c.group_size = static_cast<int>(rng.uniform_int(1, 3));
    const int heads = c.group_size * static_cast<int>(rng.uniform_int(1, 8 / c.group_size));
    for (int h = 0; h < heads; ++h) c.attention_s.push_back(trial % 3 == 0 ? 1.0 : rng.uniform());
    c.qo_s = rng.uniform() * 0.3;
    c.qkvo_s = c.qo_s + rng.uniform() * 0.3;
    c.offload_per_group_s = trial % 4 == 1 ? rng.uniform() : 0;
    const int devices = static_cast<int>(rng.uniform_int(1, std::min(3, heads)));
    double best = std::numeric_limits<double>::infinity();
    for_each_assignment(c, devices, [&](const HeadAssignment& a) { best = std::min(best, layer_time(c, a, devices)); });
    const double simple = lower_bound_simple(c, devices);
    const double strong = lower_bound(c, devices);
    EXPECT_LE(simple, strong);
    EXPECT_LE(strong, best * (1 + 1e-12)) << "trial " << trial;
    tight += strong >= best * (1 - 1e-12);
  }
  EXPECT_GT(tight, 10);  // the bound is often the optimum, so it is worth stopping at
}

// The pieces relaxation admits every real assignment's time, on tiny layers shaped like the scenarios (a few
// FULL-like heads among light ones, GQA groups of 2-4, K/V projections not negligible), so its bound is
// below the exhaustive optimum; and it is tighter than the quick bounds on some of them (else it is useless).
TEST(HeadCostModel, PiecesBoundIsALowerBoundOfTheExhaustiveOptimum) {
  Rng rng(17);
  int tighter = 0;
  for (int trial = 0; trial < 120; ++trial) {
    LayerCosts c;
    c.group_size = static_cast<int>(rng.uniform_int(2, 4));
    const int heads = c.group_size * static_cast<int>(rng.uniform_int(1, 9 / c.group_size));
    for (int h = 0; h < heads; ++h) {
      c.attention_s.push_back(rng.uniform() < 0.3 ? 8 + 2 * rng.uniform() : 0.5 + rng.uniform());
    }
    c.qo_s = rng.uniform() * 0.5;
    c.qkvo_s = c.qo_s + rng.uniform() * (trial % 2 == 0 ? 0.5 : 2.0);
    c.offload_per_group_s = trial % 5 == 2 ? rng.uniform() : 0;
    const int devices = static_cast<int>(rng.uniform_int(1, std::min(3, heads)));
    double best = std::numeric_limits<double>::infinity();
    for_each_assignment(c, devices, [&](const HeadAssignment& a) { best = std::min(best, layer_time(c, a, devices)); });
    const double quick = lower_bound_quick(c, devices);
    EXPECT_TRUE(pieces_allow(c, devices, best)) << "trial " << trial;
    const double pieces = pieces_lower_bound(c, devices, quick);
    EXPECT_LE(pieces, best * (1 + 1e-12)) << "trial " << trial;
    EXPECT_LE(lower_bound(c, devices), best * (1 + 1e-12)) << "trial " << trial;
    EXPECT_GE(lower_bound(c, devices), quick);
    tighter += pieces > quick * (1 + 1e-6);
  }
  EXPECT_GT(tighter, 5);
}

// S10 (seed 1: 13 FULL heads in 11 of 18 KV groups on 8 GPUs): the quick bounds charge each group's K/V
// projection once; two FULL heads per GPU at most and 9 groups with one FULL head force more pieces.
TEST(HeadCostModel, PiecesBoundChargesTheSplitsFullHeadsForce) {
  LayerCosts c;
  c.group_size = 4;
  c.qo_s = 1;
  c.qkvo_s = 2;
  const char* groups[] = {"XYFZ", "ZFZF", "FYZX", "XXFZ", "FZZX", "XXXZ", "XZZY", "YFYX", "XFXX",
                          "ZYZX", "FZXY", "ZXZX", "YFXF", "XYYF", "YFYZ", "YXXY", "YXZZ", "XYZY"};
  for (const char* g : groups) {
    for (const char* t = g; *t != 0; ++t)
      c.attention_s.push_back(*t == 'F' ? 32 : *t == 'X' ? 3.2 : *t == 'Y' ? 2.5 : 2);
  }
  const double quick = lower_bound_quick(c, 8);
  const double strong = lower_bound(c, 8);
  EXPECT_GT(strong, quick * 1.002);
  EXPECT_FALSE(pieces_allow(c, 8, quick * 1.001));
}

TEST(HeadCostModel, PigeonholeBoundSeesHeavyHeadsThatDoNotDivide) {
  LayerCosts c;
  c.attention_s.assign(9, 1.0);  // 9 equal heads, each its own group, on 4 devices: some device holds 3
  c.qkvo_s = 0.1;
  c.qo_s = 0.1;
  EXPECT_NEAR(lower_bound_simple(c, 4), 9 * 1.1 / 4, 1e-12);
  EXPECT_NEAR(lower_bound(c, 4), 3 * 1.1, 1e-12);
}

nlohmann::json profile_json() {
  return nlohmann::json::parse(R"({
    "device": "test", "prompt_tokens": [1000, 2000, 4000],
    "t_qkvo_s": [2, 4, 8], "t_qo_s": [1, 2, 4],
    "attention_s": {"full": [10, 40, 160], "a-shape:128:4096": [1, 2, 4]}})");
}

RuntimeProfile profile_from(const nlohmann::json& j) {
  const JsonDocument doc(j, "prof.json", "profile");
  return RuntimeProfile::from_json(doc.root());
}

TEST(HeadRuntimeProfile, InterpolatesLinearlyBetweenGridPoints) {
  const RuntimeProfile p = profile_from(profile_json());
  EXPECT_DOUBLE_EQ(p.attention(HeadPattern::full(), 2000), 40);
  EXPECT_DOUBLE_EQ(p.attention(HeadPattern::full(), 1500), 25);
  EXPECT_DOUBLE_EQ(p.attention(HeadPattern::full(), 3000), 100);
  EXPECT_DOUBLE_EQ(p.attention(HeadPattern::a_shape(128, 4096), 4000), 4);
  EXPECT_DOUBLE_EQ(p.qkvo(1500), 3);
  EXPECT_DOUBLE_EQ(p.qo(3500), 3.5);
  EXPECT_EQ(profile_from(p.to_json()).attention_s, p.attention_s);
}

TEST(HeadRuntimeProfile, OutsideTheGridIsAnErrorUnlessExtrapolationIsStated) {
  const RuntimeProfile p = profile_from(profile_json());
  EXPECT_NE(error_of([&] {
              p.attention(HeadPattern::full(), 8000);
            }).find("prompt tokens = 8000: outside the runtime profile's grid [1000, 4000] for full"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              p.attention(HeadPattern::a_shape(64, 4096), 2000);
            }).find("pattern 'a-shape:64:4096': not in the runtime profile; it has a-shape:128:4096, full"),
            std::string::npos);
  nlohmann::json j = profile_json();
  j["extrapolate"] = true;
  const RuntimeProfile e = profile_from(j);
  EXPECT_DOUBLE_EQ(e.attention(HeadPattern::full(), 8000), 160 + 120 * 2);  // the last segment's slope
  EXPECT_DOUBLE_EQ(e.attention(HeadPattern::full(), 500), 0);               // clamped at 0
}

TEST(HeadRuntimeProfile, BadFilesNameTheField) {
  auto with = [](const char* pointer, nlohmann::json value) {
    nlohmann::json j = profile_json();
    j[nlohmann::json::json_pointer(pointer)] = std::move(value);
    return j;
  };
  EXPECT_NE(error_of([&] {
              profile_from(with("/prompt_tokens/1", 500));
            }).find("prof.json: profile.prompt_tokens[1] = 500: must be larger than the length before it"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              profile_from(with("/t_qo_s", nlohmann::json::array({1, 2})));
            }).find("profile.t_qo_s"),
            std::string::npos);
  EXPECT_NE(error_of([&] { profile_from(with("/attention_s/full/0", -1)); }).find("profile.attention_s.full[0] = -1"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              profile_from(with("/attention_s/lambda", nlohmann::json::array({1, 2, 3})));
            }).find("profile.attention_s.lambda"),
            std::string::npos);
}

TEST(HeadCostModel, AnalyticTimesFollowTheVisiblePairs) {
  const AnalyticHeadCost a;
  const Tokens len = 8192;
  const double full = a.attention(HeadPattern::full(), len);
  EXPECT_DOUBLE_EQ(full, static_cast<double>(len) * (len + 1) / 2 * 4 * 128 / 300e12);
  const double lambda = a.attention(HeadPattern::a_shape(128, 1024), len);
  const double lambda_pairs = static_cast<double>(MaskSpec::lambda(128, 1024).document_pairs(len));
  EXPECT_DOUBLE_EQ(lambda / full, lambda_pairs / (static_cast<double>(len) * (len + 1) / 2));
  EXPECT_DOUBLE_EQ(a.qkvo(len), 2 * a.qo(len));
  EXPECT_DOUBLE_EQ(a.qo(len), 2 * 2.0 * len * 4096 * 128 / 600e12);

  HeadCostModel model;
  const LayerCosts c = model.layer(
      {HeadPattern::full(), HeadPattern::a_shape(128, 1024), HeadPattern::full(), HeadPattern::full()}, 2, len);
  EXPECT_EQ(c.group_size, 2);
  EXPECT_DOUBLE_EQ(c.attention_s[0], full);
  EXPECT_DOUBLE_EQ(c.attention_s[1], lambda);
  EXPECT_NE(error_of([&] {
              model.layer({HeadPattern::full(), HeadPattern::full()}, 3, len);
            }).find("kv_heads = 3"),
            std::string::npos);
}

}  // namespace
}  // namespace fulcrum::heads
