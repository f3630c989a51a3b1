#include "fulcrum/sim/memory.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/cost/hardware_model.hpp"
#include "fulcrum/planners/baselines/perdoc_cp.hpp"
#include "fulcrum/sim/auto_choice.hpp"
#include "fulcrum/sim/layer.hpp"
#include "fulcrum/workload/model_config.hpp"
#include "fulcrum/workload/model_shape.hpp"

#include <gtest/gtest.h>

namespace fulcrum::sim {
namespace {

// Llama 3 8B (hidden 4096, 32 q / 8 kv heads of 128, MLP 14336, bf16) on 64 GPUs, tp 8, pp 2 (dp 4, 16
// layers a stage), worked by hand:
//  - a layer's weights: QKV 4096 x 48 x 128 + O 4096 x 4096 + MLP 3 x 4096 x 14336 = 218,103,808, so a
//    GPU holds 218,103,808 x 16 / 8 = 436,207,616 parameters: 2, 4 and 12 / dp (ZeRO-1) bytes each;
//  - a token keeps per layer (2 x 4096 + 48 x 128 + 32 x 128 + 3 x 14336) x 2 bytes + 32 fp32 LSE values
//    = 123,008 bytes: x 1,000 tokens in flight x 16 layers / tp 8 = 246,016,000 bytes.
TEST(Memory, EveryPartMatchesAHandWorkedLayout) {
  const ModelShape llama = model_shape_preset("llama3-8b");
  const ParallelConfig p{.gpus = 64, .tp = 8, .pp = 2, .cp = 1, .microbatches = 0};
  const HardwareModel h200 = hardware_preset("h200-dgx");
  const ActivationLoad load{.tokens_in_flight = 1000, .microbatch_tokens = 500, .attention_buffer_bytes = 8e6};
  EXPECT_DOUBLE_EQ(layer_parameters(llama), 218'103'808);

  const MemoryUse none = memory_per_gpu(llama, h200, p, {}, load);
  EXPECT_DOUBLE_EQ(none.weights_bytes, 872'415'232);
  EXPECT_DOUBLE_EQ(none.gradients_bytes, 1'744'830'464);
  EXPECT_DOUBLE_EQ(none.optimizer_bytes, 1'308'622'848);  // 12 x 436,207,616 / 4
  EXPECT_DOUBLE_EQ(none.activations_bytes, 246'016'000);
  EXPECT_DOUBLE_EQ(none.attention_buffers_bytes, 1e6);
  EXPECT_DOUBLE_EQ(none.total_bytes(), 872'415'232.0 + 1'744'830'464 + 1'308'622'848 + 246'016'000 + 1e6);
  EXPECT_FALSE(none.out_of_memory());

  // Without ZeRO-1 every GPU holds all of its stage's optimizer state.
  EXPECT_DOUBLE_EQ(memory_per_gpu(llama, h200, p, {.zero1 = false}, load).optimizer_bytes, 5'234'491'392);
  // Selective: the LSE (128 bytes a token) is recomputed: 122,880 x 1,000 x 16 / 8.
  EXPECT_DOUBLE_EQ(memory_per_gpu(llama, h200, p, {.recompute = Recompute::kSelective}, load).activations_bytes,
                   245'760'000);
  // Full: a layer's input (4096 x 2 bytes) per token and layer, 16,384,000, and one layer of one micro-batch
  // being recomputed, 123,008 x 500 / 8 = 7,688,000.
  EXPECT_DOUBLE_EQ(memory_per_gpu(llama, h200, p, {.recompute = Recompute::kFull}, load).activations_bytes,
                   16'384'000 + 7'688'000);

  HardwareModel small = h200;
  small.memory_bytes = 4e9;
  EXPECT_TRUE(memory_per_gpu(llama, small, p, {}, load).out_of_memory());
}

TEST(Memory, PoliciesParseAndBadOnesNameTheField) {
  EXPECT_EQ(parse_recompute("selective"), Recompute::kSelective);
  EXPECT_EQ(to_string(Recompute::kFull), "full");
  EXPECT_TRUE(parse_zero1("1"));
  EXPECT_FALSE(parse_zero1("0"));
  try {
    parse_recompute("some");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "recompute = 'some': must be none, selective or full");
  }
  EXPECT_THROW(parse_zero1("yes", "zero1"), Error);
}

// The attention buffers a rank allocates for one forward layer (the compiled Program's workspace, what the
// executor holds beside the rank's own rows), worked by hand for each planner family on one causal document
// of 8,192 tokens over 2 ranks of 4,096, tiny model (4 q / 2 kv heads of 64, bf16): a Q-side row (Q, O, fp32
// LSE) is 512 + 512 + 16 = 1,040 bytes, a K/V row 256 + 256 = 512. A rank holds its tasks' Q-side rows and,
// per document, the stretch of keys they see.
TEST(Memory, AttentionBuffersMatchHandWorkedLayoutsPerPlannerFamily) {
  PlannerOptions options;
  options.model = model_shape_preset("tiny");
  const Batch batch = BatchStream([] { return Tokens{8192}; }, 2, 4096).next();
  const auto forward_buffers = [&](const std::string& name, const PlannerOptions& o) {
    const Assignment a = plan_verified(*make_planner(name, o), batch);
    return simulate_pass(a, gpu_per_rank(o.model, "h200-dgx", CommMode::kSingleStream), Pass::kForward).workspace_bytes;
  };
  constexpr double kQ = 1040, kKv = 512;
  // Owner computes (packed): rank 0's rows see keys [0, 4096); rank 1's see [0, 8192), half of them received.
  EXPECT_EQ(forward_buffers("packed", options), (std::vector<double>{4096 * kQ + 4096 * kKv, 4096 * kQ + 8192 * kKv}));
  // Per-document CP, cp 2: rank 0 holds chunks 0 and 3 (2,048 rows each), whose keys span [0, 8192); rank 1
  // chunks 1 and 2, keys [0, 6144): the all-gathered K/V.
  PlannerOptions cp2 = options;
  cp2.set(cp_degree_option().name, 2);
  EXPECT_EQ(forward_buffers("perdoc-cp", cp2), (std::vector<double>{4096 * kQ + 8192 * kKv, 4096 * kQ + 6144 * kKv}));
  // DistCA (attention servers): the causal pairs split in half at query 8192 / sqrt(2) = 5,793, and the
  // balancer cuts at the 128-token granularity below it: rank 0 serves queries [0, 5760) (1,664 of them
  // received) over keys [0, 5760); rank 1 queries [5760, 8192) over keys [0, 8192).
  EXPECT_EQ(forward_buffers("distca", options),
            (std::vector<double>{5760 * kQ + 5760 * kKv, (8192 - 5760) * kQ + 8192 * kKv}));
  // Ring: as packed, plus the LSE of the step being merged (4,096 x 16 bytes) on the rank that receives a step.
  EXPECT_EQ(forward_buffers("ring", options),
            (std::vector<double>{4096 * kQ + 4096 * kKv, 4096 * kQ + 8192 * kKv + 4096 * 16}));
}
}  // namespace
}  // namespace fulcrum::sim
