#include "fulcrum/sim/prefill.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/planners/heads/scenarios.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <functional>

namespace fulcrum::sim {
namespace {

// A given assignment ([layer][q head] -> device) as a plan, unpriced: what simulate_prefill reads of it.
heads::ModelPlan fixed_plan(std::string name, std::vector<heads::HeadAssignment> assignment) {
  heads::ModelPlan plan;
  plan.solver = std::move(name);
  plan.assignment = std::move(assignment);
  return plan;
}

std::string error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A hand-sized problem: 2 layers of 4 q heads in 2 KV groups, on a machine with round numbers, so every
// term can be written out below.
ModelShape hand_shape() {
  ModelShape s;
  s.name = "hand";
  s.layers = 2;
  s.hidden = 8;
  s.q_heads = 4;
  s.kv_heads = 2;
  s.head_dim = 2;
  s.ffn_hidden = 16;
  s.dtype_bytes = 2;
  return s;
}

HardwareModel hand_hardware() {
  HardwareModel hw = hardware_preset("a800-sxm");
  hw.devices_per_node = 2;
  hw.peak_flops = 1000;
  hw.linear_mfu = 0.5;  // 500 FLOP/s for the MLP
  hw.intra_node = {100, 0.01};
  hw.inter_node = {10, 0.1};
  hw.host_link = {64, 0};
  return hw;
}

std::vector<heads::LayerCosts> hand_costs() {
  heads::LayerCosts a;
  a.attention_s = {4, 1, 1, 1};
  a.group_size = 2;
  a.qkvo_s = 0.2;
  a.qo_s = 0.1;
  heads::LayerCosts b = a;
  b.attention_s = {1, 1, 1, 3};
  return {a, b};
}

TEST(PrefillSim, HandCaseWithoutCpipFollowsTheFormulas) {
  const ModelShape shape = hand_shape();
  const HardwareModel hw = hand_hardware();
  const heads::ModelPlan solved = fixed_plan("fixed", {{0, 0, 1, 1}, {0, 1, 0, 1}});
  const PrefillSimOptions options{16, 2, true, false};
  const PrefillSimResult r = simulate_prefill(shape, hw, hand_costs(), solved, options);
  ASSERT_EQ(r.layers.size(), 2U);
  // Layer 0: device 0 holds heads 0, 1 (one group): 4 + 1 + 2 x 0.1 + 0.1 = 5.3; device 1: 1 + 1 + 0.3 = 2.3.
  // Layer 1: each device holds one head of each group: 1 + 1 + 0.2 + 0.2 = 2.4 and 1 + 3 + 0.4 = 4.4.
  EXPECT_NEAR(r.layers[0].block_s[0], 5.3, 1e-12);
  EXPECT_NEAR(r.layers[0].block_s[1], 2.3, 1e-12);
  EXPECT_NEAR(r.layers[1].block_s[1], 4.4, 1e-12);
  EXPECT_NEAR(r.layers[0].attention_s[0], 5.0, 1e-12);
  EXPECT_NEAR(r.layers[0].spread, 3.0 / 5.3, 1e-12);
  // WPR weights: per head 2 x 8 x 2 x 2 = 64 bytes for W_Q and W_O, per group 64 more for W_K / W_V.
  // Layer 0: 2 heads, 1 group = 192 bytes = 3 s at 64 B/s; layer 1: 2 heads, 2 groups = 256 B = 4 s.
  EXPECT_NEAR(r.layers[0].weights_s[0], 3.0, 1e-12);
  EXPECT_NEAR(r.layers[1].weights_s[0], 4.0, 1e-12);
  // MLP: 6 x 16 x 8 x 16 / 2 FLOPs at 500 FLOP/s; its weights 3 x 8 x 8 x 2 bytes at 64 B/s.
  const double mlp = 6.0 * 16 * 8 * 8 / 500;
  const double mlp_weights = 3.0 * 8 * 8 * 2 / 64;
  EXPECT_NEAR(r.layers[0].mlp_s, mlp, 1e-12);
  EXPECT_NEAR(r.layers[0].mlp_weights_s, mlp_weights, 1e-12);
  // Ring all-reduce of 16 x 8 x 2 bytes on 2 devices: 2 steps, each moving half: 256 / 100 + 2 x 0.01.
  const double all_reduce = 2.0 * 1 / 2 * 256 / 100 + 2 * 0.01;
  EXPECT_NEAR(r.layers[0].all_reduce_s, all_reduce, 1e-12);
  // Without CPIP every load precedes its compute; the slowest device sets each phase.
  const double layer0 = (3.0 + 5.3) + (mlp_weights + mlp) + 2 * all_reduce;
  const double layer1 = (4.0 + 4.4) + (mlp_weights + mlp) + 2 * all_reduce;
  EXPECT_NEAR(r.layers[0].layer_s, layer0, 1e-9);
  EXPECT_NEAR(r.layers[1].layer_s, layer1, 1e-9);
  EXPECT_EQ(r.first_load_s, 0);
  EXPECT_NEAR(r.latency_s, layer0 + layer1, 1e-9);
  EXPECT_NEAR(r.tokens_per_s, 16 / (layer0 + layer1), 1e-9);

  // With CPIP: layer 0's attention weights first (3 s on device 0, 2 heads and 1 group on device 1 too);
  // then attention hides the MLP weights' load and the MLP the next layer's attention weights (4 s).
  const PrefillSimResult c = simulate_prefill(shape, hw, hand_costs(), solved, {16, 2, true, true});
  EXPECT_NEAR(c.first_load_s, 3.0, 1e-12);
  EXPECT_NEAR(c.layers[0].layer_s, std::max(5.3, mlp_weights) + std::max(mlp, 4.0) + 2 * all_reduce, 1e-9);
  EXPECT_NEAR(c.layers[1].layer_s, std::max(4.4, mlp_weights) + mlp + 2 * all_reduce, 1e-9);
  EXPECT_NEAR(c.latency_s, 3.0 + c.layers[0].layer_s + c.layers[1].layer_s, 1e-9);

  // Without WPR every device loads all four matrices: 2 x (4 q + 2 kv heads) x 32 bytes = 384 B = 6 s.
  const PrefillSimResult full = simulate_prefill(shape, hw, hand_costs(), solved, {16, 2, false, false});
  EXPECT_NEAR(full.layers[0].weights_s[1], 6.0, 1e-12);
  EXPECT_GT(full.latency_s, r.latency_s);
}

TEST(PrefillSim, OneDeviceHasNoAllReduceAndSpansNodesOverTheSlowLink) {
  const ModelShape shape = hand_shape();
  const HardwareModel hw = hand_hardware();
  const auto costs = hand_costs();
  const PrefillSimResult one =
      simulate_prefill(shape, hw, costs, fixed_plan("one", {{0, 0, 0, 0}, {0, 0, 0, 0}}), {16, 1});
  for (const auto& l : one.layers) {
    EXPECT_EQ(l.all_reduce_s, 0);
    EXPECT_EQ(l.spread, 0);
  }
  // 4 devices on nodes of 2: the ring crosses the inter-node link: 6 steps, each moving a quarter.
  const PrefillSimResult four =
      simulate_prefill(shape, hw, costs, fixed_plan("four", {{0, 1, 2, 3}, {3, 2, 1, 0}}), {16, 4});
  EXPECT_NEAR(four.layers[0].all_reduce_s, 6.0 / 4 * 256 / 10 + 6 * 0.1, 1e-12);
}

// Llama-shaped (small-gqa) with the mixed built-in patterns on the A800 preset.
struct LlamaCase {
  ModelShape shape = model_shape_preset("small-gqa");
  HardwareModel hw = hardware_preset("a800-sxm");
  std::vector<heads::LayerCosts> costs(Tokens tokens) const {
    const auto report = heads::load_head_patterns("mixed", shape, tokens);
    return heads::model_layer_costs(report, shape, tokens, preset_head_cost_model(shape, hw, tokens, std::nullopt));
  }
};

TEST(PrefillSim, LayerTimeIsTheSlowestDevicePlusTwoAllReduces) {
  const LlamaCase s;
  const auto costs = s.costs(4096);
  for (bool cpip : {false, true}) {
    const auto solved = heads::solve_model("random", costs, 4, 7);
    const PrefillSimResult r = simulate_prefill(s.shape, s.hw, costs, solved, {4096, 4, true, cpip});
    double total = r.first_load_s;
    for (std::size_t l = 0; l < r.layers.size(); ++l) {
      const auto& layer = r.layers[l];
      double slowest = 0;
      for (std::size_t d = 0; d < 4; ++d) {
        const double attention =
            cpip ? std::max(layer.block_s[d], layer.mlp_weights_s) : layer.weights_s[d] + layer.block_s[d];
        slowest = std::max(slowest, attention);
      }
      EXPECT_NEAR(layer.attention_phase_s, slowest, 1e-15);
      EXPECT_NEAR(layer.layer_s, layer.attention_phase_s + layer.mlp_phase_s + 2 * layer.all_reduce_s, 1e-15);
      total += layer.layer_s;
    }
    EXPECT_NEAR(r.latency_s, total, 1e-12);
    EXPECT_DOUBLE_EQ(r.tokens_per_s, 4096 / r.latency_s);
  }
}

TEST(PrefillSim, LptLsIsNeverSlowerThanUniform) {
  const LlamaCase s;
  for (Tokens tokens : {2048, 16384}) {
    const auto costs = s.costs(tokens);
    for (int devices : {2, 3, 4}) {
      const auto uniform = heads::solve_model("uniform", costs, devices, 1);
      const auto ours = heads::solve_model("lpt-ls", costs, devices, 1);
      // WPR off: the weights loaded are the same for every assignment, so only the heads differ.
      for (bool cpip : {false, true}) {
        const PrefillSimOptions options{tokens, devices, false, cpip};
        const auto u = simulate_prefill(s.shape, s.hw, costs, uniform, options);
        const auto o = simulate_prefill(s.shape, s.hw, costs, ours, options);
        for (std::size_t l = 0; l < u.layers.size(); ++l) {
          const auto& ub = u.layers[l].block_s;
          const auto& ob = o.layers[l].block_s;
          EXPECT_LE(*std::max_element(ob.begin(), ob.end()), *std::max_element(ub.begin(), ub.end()) * (1 + 1e-12));
          EXPECT_LE(o.layers[l].layer_s, u.layers[l].layer_s * (1 + 1e-12)) << "layer " << l << " D " << devices;
        }
        EXPECT_LE(o.latency_s, u.latency_s * (1 + 1e-12));
      }
    }
  }
}

TEST(PrefillSim, LatencyGrowsWithThePrompt) {
  const LlamaCase s;
  double previous = 0;
  for (Tokens tokens : {1024, 2048, 4096, 8192, 16384}) {
    const auto costs = s.costs(tokens);
    const auto r = simulate_prefill(s.shape, s.hw, costs, heads::solve_model("lpt-ls", costs, 4, 1), {tokens, 4});
    EXPECT_GT(r.latency_s, previous) << tokens;
    previous = r.latency_s;
  }
}

TEST(PrefillSim, AnalyticHeadsRunAtThePresetsRates) {
  const LlamaCase s;
  const auto model = preset_head_cost_model(s.shape, s.hw, 65536, std::nullopt);
  // A800: FlashAttention-2's 73% of 312 TFLOP/s at full tiles; projections at half of peak.
  EXPECT_NEAR(model.analytic.attention_flops_per_s, 0.73 * 312e12, 1e3);
  EXPECT_DOUBLE_EQ(model.analytic.gemm_flops_per_s, 156e12);
  EXPECT_EQ(model.analytic.head_dim, s.shape.head_dim);
  EXPECT_EQ(model.analytic.hidden, s.shape.hidden);
}

TEST(PrefillSim, BadInputNamesTheField) {
  const LlamaCase s;
  const auto costs = s.costs(1024);
  const auto solved = heads::solve_model("uniform", costs, 2, 1);
  EXPECT_NE(error_of([&] {
              simulate_prefill(s.shape, s.hw, costs, solved, {0, 2});
            }).find("tokens = 0"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              simulate_prefill(s.shape, s.hw, costs, solved, {1024, 17});
            }).find("devices = 17: must be in [1, 16]"),
            std::string::npos);
  EXPECT_NE(error_of([&] { heads::solve_model("fastest", costs, 2, 1); }).find("solver"), std::string::npos);
}

TEST(PrefillSim, JsonCarriesTotalsAndLayers) {
  const LlamaCase s;
  const auto costs = s.costs(2048);
  const auto r = simulate_prefill(s.shape, s.hw, costs, heads::solve_model("greedy", costs, 2, 1), {2048, 2});
  const nlohmann::json j = to_json(r);
  EXPECT_EQ(j.at("solver"), "greedy");
  EXPECT_EQ(j.at("layers").size(), static_cast<std::size_t>(s.shape.layers));
  EXPECT_DOUBLE_EQ(j.at("tokens_per_s").get<double>(), r.tokens_per_s);
  EXPECT_EQ(j.at("layers")[0].at("block_s").size(), 2U);
}

}  // namespace
}  // namespace fulcrum::sim
