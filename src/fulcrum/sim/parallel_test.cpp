#include "fulcrum/sim/parallel.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/workload/limits.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace fulcrum::sim {
namespace {

// A TP group is tp GPUs acting as one device: everything that adds up over GPUs scales by tp, latencies
// and the model's utilisation do not.
TEST(Parallel, TpGroupScalesWhatAddsUpOverGpus) {
  const HardwareModel gpu = hardware_preset("h200-dgx");
  const HardwareModel group = tp_group_hardware(gpu, 4);
  EXPECT_EQ(group.devices_per_node, gpu.devices_per_node / 4);
  EXPECT_DOUBLE_EQ(group.peak_flops, 4 * gpu.peak_flops);
  EXPECT_DOUBLE_EQ(group.memory_bytes, 4 * gpu.memory_bytes);
  EXPECT_DOUBLE_EQ(group.memory_bandwidth, 4 * gpu.memory_bandwidth);
  EXPECT_DOUBLE_EQ(group.intra_node.bandwidth_bytes_per_s, 4 * gpu.intra_node.bandwidth_bytes_per_s);
  EXPECT_DOUBLE_EQ(group.inter_node.bandwidth_bytes_per_s, 4 * gpu.inter_node.bandwidth_bytes_per_s);
  EXPECT_DOUBLE_EQ(group.inter_node.latency_s, gpu.inter_node.latency_s);
  EXPECT_DOUBLE_EQ(group.linear_mfu, gpu.linear_mfu);
  // The same attention work takes a quarter of the time on every shard shape.
  for (Tokens len : {64, 1000, 131072}) {
    EXPECT_NEAR(group.attention_forward_s(len, len, 1e12), gpu.attention_forward_s(len, len, 1e12) / 4, 1e-15);
    EXPECT_NEAR(group.attention_backward_s(len, len, 1e12), gpu.attention_backward_s(len, len, 1e12) / 4, 1e-15);
  }
  EXPECT_EQ(tp_group_hardware(gpu, 1).to_json(), gpu.to_json());
}

TEST(Parallel, CollectivesFollowTheRingFormula) {
  HardwareModel gpu = hardware_preset("h200-dgx");
  gpu.intra_node = {100.0, 0.5};
  gpu.inter_node = {10.0, 1.0};
  EXPECT_EQ(tp_allreduce_s(gpu, 1, 1000), 0);
  // 2 (tp - 1) steps of latency, each GPU moving 2 (tp - 1) / tp of the bytes: 4 = 6 x 0.5 + 1.5 x 1000 / 100.
  EXPECT_DOUBLE_EQ(tp_allreduce_s(gpu, 4, 1000), 6 * 0.5 + 1.5 * 1000 / 100.0);
  EXPECT_EQ(dp_gradient_sync_s(gpu, 1, true, 1000), 0);
  EXPECT_DOUBLE_EQ(dp_gradient_sync_s(gpu, 2, true, 1000), 2 * 1.0 + 1.0 * 1000 / 10.0);
  EXPECT_DOUBLE_EQ(dp_gradient_sync_s(gpu, 2, false, 1000), 2 * 0.5 + 1.0 * 1000 / 100.0);
}

TEST(Parallel, LayoutsAreValidatedWithTheFieldNamed) {
  const HardwareModel gpu = hardware_preset("h200-dgx");
  const ModelShape model = model_shape_preset("llama3-8b");
  const ParallelConfig good{.gpus = 64, .tp = 8, .pp = 2, .cp = 2, .microbatches = 0};
  EXPECT_NO_THROW(good.validate(gpu, model));
  EXPECT_EQ(good.dp(), 4);
  EXPECT_EQ(good.attention_ranks(), 8);
  EXPECT_EQ(good.microbatch_count(), 4);
  EXPECT_EQ(good.to_string(), "tp8 dp4 pp2 cp2 mb4");
  auto expect_error = [&](ParallelConfig p, const std::string& field) {
    try {
      p.validate(gpu, model);
      ADD_FAILURE() << "no error for " << field;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  auto p = good;
  p.tp = 16;  // more than a node
  expect_error(p, "tp = 16");
  p = good;
  p.gpus = 60;
  expect_error(p, "pp = 2");
  p = good;
  p.pp = 3;  // 32 layers
  expect_error(p, "pp = 3");
  p = good;
  p.cp = 3;
  expect_error(p, "cp = 3");
  p = good;
  p.microbatches = -1;
  expect_error(p, "microbatches");
  // tp x pp = 2^32 does not fit an int: wrapped to 0 it divided gpus by zero (SIGFPE).
  p = good;
  p.gpus = 8;
  p.pp = 536870912;
  expect_error(p, "pp = 536870912: tp x pp = 4294967296 must divide gpus = 8");
  p = good;
  p.gpus = kMaxRanks + 1;
  expect_error(p, "gpus = 65537: must be in [1, 65536]");
  HardwareModel cpu = gpu;
  cpu.compute_slots_per_node = 2;
  EXPECT_THROW(good.validate(cpu, model), Error);
}

TEST(Parallel, PowersOfTwoDividingStopAtTheLimit) {
  EXPECT_EQ(powers_of_two_dividing(24, 64), (std::vector<int>{1, 2, 4, 8}));
  EXPECT_EQ(powers_of_two_dividing(64, 8), (std::vector<int>{1, 2, 4, 8}));
  EXPECT_EQ(powers_of_two_dividing(7, 64), (std::vector<int>{1}));
}

}  // namespace
}  // namespace fulcrum::sim
