#include "fulcrum/cost/hardware_model.hpp"

#include "fulcrum/core/error.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>

namespace fulcrum {
namespace {

// The message of the Error `body` throws ("" if it throws none), to check which field it names.
std::string error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A calibration file as `fulcrum profile` would leave it for a 4-core CPU box.
nlohmann::json cpu_local_json() {
  return {{"name", "cpu-local"},
          {"devices_per_node", 4},
          {"peak_flops", 2.0e11},
          {"memory_bytes", 6.4e10},
          {"memory_bandwidth", 2.0e10},
          {"intra_node", {{"bandwidth_bytes_per_s", 8.0e9}, {"latency_s", 2e-6}}},
          {"inter_node", {{"bandwidth_bytes_per_s", 8.0e9}, {"latency_s", 2e-6}}},
          {"linear_mfu", 0.6},
          {"compute_slots_per_node", 2},
          {"attention", ProfileTable::from_peak(1.0e11).to_json()}};
}

TEST(HardwareModel, PresetsAreValidAndSplitLinksByNode) {
  EXPECT_EQ(hardware_preset_names(),
            (std::vector<std::string>{"h200-dgx", "a100-p4de", "a100-40g-ib", "a800-sxm", "rtx3090x4-pcie"}));
  for (const auto& name : hardware_preset_names()) {
    const HardwareModel hw = hardware_preset(name);
    EXPECT_EQ(hw.name, name);
    EXPECT_NO_THROW(hw.validate());
    const int n = hw.devices_per_node;
    ASSERT_EQ(n, name == "rtx3090x4-pcie" ? 4 : 8);
    EXPECT_EQ(&hw.link(0, n - 1), &hw.intra_node);
    EXPECT_EQ(&hw.link(0, n), &hw.inter_node);
    EXPECT_EQ(&hw.link(n - 1, n), &hw.inter_node);
    EXPECT_EQ(&hw.link(n + 1, 2 * n - 1), &hw.intra_node);
    EXPECT_EQ(&hw.link(3, 3), &hw.intra_node);
    // The fast link is the fast one, and full-tile attention is slower than the dense peak.
    EXPECT_GT(hw.intra_node.bandwidth_bytes_per_s, 5 * hw.inter_node.bandwidth_bytes_per_s);
    EXPECT_GT(hw.attention_forward_s(8192, 8192, 1e12), 1e12 / hw.peak_flops);
    EXPECT_GT(hw.attention_backward_s(8192, 8192, 1e12), hw.attention_forward_s(8192, 8192, 1e12));
    // Every GPU streams host weights over PCIe, slower than its own memory.
    EXPECT_TRUE(hw.has_host_link());
    EXPECT_LT(hw.host_link.bandwidth_bytes_per_s, hw.memory_bandwidth);
  }
  // Per-direction conversions: 900 GB/s and 600 GB/s bidirectional NVLink; 400 Gb/s NIC per GPU on the
  // DGX, 400 Gb/s EFA per 8-GPU instance on p4de.
  const HardwareModel h200 = hardware_preset("h200-dgx");
  EXPECT_DOUBLE_EQ(h200.intra_node.bandwidth_bytes_per_s, 450e9);
  EXPECT_DOUBLE_EQ(h200.inter_node.bandwidth_bytes_per_s, 50e9);
  EXPECT_DOUBLE_EQ(h200.peak_flops, 989.5e12);
  const HardwareModel a100 = hardware_preset("a100-p4de");
  EXPECT_DOUBLE_EQ(a100.intra_node.bandwidth_bytes_per_s, 300e9);
  EXPECT_DOUBLE_EQ(a100.inter_node.bandwidth_bytes_per_s, 6.25e9);
  EXPECT_DOUBLE_EQ(h200.host_link.bandwidth_bytes_per_s, 64e9);  // PCIe Gen5 x16, one way
  EXPECT_DOUBLE_EQ(a100.host_link.bandwidth_bytes_per_s, 32e9);  // PCIe Gen4 x16, one way
  // A800: the A100 80GB with NVLink at 400 GB/s both ways; the 3090 node: PCIe 4.0 between GPUs.
  const HardwareModel a800 = hardware_preset("a800-sxm");
  EXPECT_DOUBLE_EQ(a800.peak_flops, 312e12);
  EXPECT_DOUBLE_EQ(a800.memory_bytes, 80e9);
  EXPECT_DOUBLE_EQ(a800.memory_bandwidth, 2039e9);
  EXPECT_DOUBLE_EQ(a800.intra_node.bandwidth_bytes_per_s, 200e9);
  EXPECT_DOUBLE_EQ(a800.host_link.bandwidth_bytes_per_s, 32e9);
  const HardwareModel rtx = hardware_preset("rtx3090x4-pcie");
  EXPECT_DOUBLE_EQ(rtx.peak_flops, 71e12);
  EXPECT_DOUBLE_EQ(rtx.memory_bytes, 24e9);
  EXPECT_DOUBLE_EQ(rtx.memory_bandwidth, 936e9);
  EXPECT_DOUBLE_EQ(rtx.intra_node.bandwidth_bytes_per_s, 32e9);
  EXPECT_DOUBLE_EQ(rtx.intra_node.latency_s, 5.7e-6);
  EXPECT_NEAR(rtx.attention_forward_s(16384, 16384, 0.73 * 71e12), 1.0, 1e-12);
  // FA3's 648 TFLOP/s forward at full tiles on the H200.
  EXPECT_NEAR(h200.attention_forward_s(16384, 16384, 648e12), 1.0, 1e-12);
}

TEST(HardwareModel, LinearCopyAndLinkTimesFollowTheirFormulas) {
  const HardwareModel hw = HardwareModel::from_json(cpu_local_json());
  EXPECT_DOUBLE_EQ(hw.linear_s(1.2e11), 1.0);  // 1.2e11 / (2e11 * 0.6)
  EXPECT_DOUBLE_EQ(hw.copy_s(4e10), 2.0);      // 4e10 / 2e10
  EXPECT_DOUBLE_EQ(hw.link(0, 5).transfer_s(8e9), 1.0 + 2e-6);
  EXPECT_DOUBLE_EQ(hw.attention_forward_s(100, 100, 1e11), 1.0);
  EXPECT_EQ(&hw.link(3, 4), &hw.inter_node);  // 4 per node
  EXPECT_NE(error_of([&] { hw.link(-1, 0); }).find("ranks must be >= 0"), std::string::npos);
}

TEST(TiledAttentionTable, ShortShardsRunAtTheirShareOfATile) {
  // Peak 1e12, 50% forward and 25% backward at full tiles, tile 128.
  const ProfileTable table = tiled_attention_table(1e12, 0.5, 0.25, 128);
  EXPECT_DOUBLE_EQ(table.forward_s(128, 128, 1e12), 2.0);  // full tiles: 0.5e12 FLOP/s
  EXPECT_DOUBLE_EQ(table.forward_s(4096, 4096, 1e12), 2.0);
  EXPECT_DOUBLE_EQ(table.forward_s(1 << 20, 1 << 20, 1e12), 2.0);  // saturates past the grid
  EXPECT_DOUBLE_EQ(table.forward_s(64, 128, 1e12), 4.0);           // 64 of 128 rows useful: half rate
  EXPECT_DOUBLE_EQ(table.forward_s(32, 64, 1e12), 16.0);           // 1/4 * 1/2 of the rate
  EXPECT_DOUBLE_EQ(table.backward_s(32, 64, 1e12), 32.0);
  EXPECT_DOUBLE_EQ(table.forward_s(1, 1, 1e12), 2.0 * 128 * 128);
  // Between grid lengths below the tile the rule is still exact: 96 / 128 and 80 / 128.
  EXPECT_NEAR(table.backward_s(96, 4096, 1e12), 4.0 / 0.75, 1e-12);
  EXPECT_NEAR(table.forward_s(80, 80, 1e12), 2.0 / (0.625 * 0.625), 1e-12);
  // A tile that is not a power of two: 80 of 96 rows useful.
  const ProfileTable odd = tiled_attention_table(1e12, 1.0, 1.0, 96);
  EXPECT_NEAR(odd.forward_s(80, 96, 1e12), 96.0 / 80.0, 1e-12);
  EXPECT_NEAR(odd.forward_s(192, 96 * 1024, 1e12), 1.0, 1e-12);
}

TEST(TiledAttentionTable, LongerShardsAreNeverSlowerPerFlop) {
  for (const auto& name : hardware_preset_names()) {
    const HardwareModel hw = hardware_preset(name);
    const std::vector<Tokens> lengths = {1,   3,   17,   64,   100,   127,    128,    129,   200,
                                         255, 256, 1000, 5000, 65536, 100000, 131072, 500000};
    // Bilinear weights of a flat stretch can round the last bit either way: allow 1e-12 relative.
    constexpr double kSlack = 1 + 1e-12;
    for (Tokens fixed : lengths) {
      double prev_q_fwd = 1e300, prev_k_fwd = 1e300, prev_q_bwd = 1e300, prev_k_bwd = 1e300;
      for (Tokens l : lengths) {
        const double q_fwd = hw.attention_forward_s(l, fixed, 1.0), k_fwd = hw.attention_forward_s(fixed, l, 1.0);
        const double q_bwd = hw.attention_backward_s(l, fixed, 1.0), k_bwd = hw.attention_backward_s(fixed, l, 1.0);
        EXPECT_LE(q_fwd, prev_q_fwd * kSlack) << name << " q=" << l << " k=" << fixed;
        EXPECT_LE(k_fwd, prev_k_fwd * kSlack) << name << " q=" << fixed << " k=" << l;
        EXPECT_LE(q_bwd, prev_q_bwd * kSlack) << name << " q=" << l << " k=" << fixed;
        EXPECT_LE(k_bwd, prev_k_bwd * kSlack) << name << " q=" << fixed << " k=" << l;
        prev_q_fwd = q_fwd, prev_k_fwd = k_fwd, prev_q_bwd = q_bwd, prev_k_bwd = k_bwd;
      }
    }
  }
}

TEST(TiledAttentionTable, RejectsBadParameters) {
  EXPECT_NE(error_of([] { tiled_attention_table(0, 0.5, 0.5, 128); }).find("peak_flops"), std::string::npos);
  EXPECT_NE(error_of([] { tiled_attention_table(1e12, 1.5, 0.5, 128); }).find("eff_forward"), std::string::npos);
  EXPECT_NE(error_of([] { tiled_attention_table(1e12, 0.5, 0, 128); }).find("eff_backward"), std::string::npos);
  EXPECT_NE(error_of([] { tiled_attention_table(1e12, 0.5, 0.5, 0); }).find("tile"), std::string::npos);
}

TEST(HardwareModel, JsonRoundTripsThroughObjectsAndFiles) {
  for (const auto& name : hardware_preset_names()) {
    const auto json = hardware_preset(name).to_json();
    EXPECT_EQ(HardwareModel::from_json(json).to_json(), json) << name;
    // Through text, as a file would hold it: doubles survive nlohmann's shortest round-trip printing.
    EXPECT_EQ(HardwareModel::from_json(nlohmann::json::parse(json.dump())).to_json(), json) << name;
  }
  const auto dir = std::filesystem::temp_directory_path() / ("fulcrum_hardware_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto path = (dir / "cpu-local.json").string();
  std::ofstream(path) << cpu_local_json().dump(2);
  const HardwareModel loaded = load_hardware(path);
  EXPECT_EQ(loaded.name, "cpu-local");
  // host_link is optional: absent, it stays not given (and out of the JSON); given, it round-trips.
  EXPECT_FALSE(loaded.has_host_link());
  EXPECT_EQ(loaded.to_json(), cpu_local_json());
  nlohmann::json with_link = cpu_local_json();
  with_link["host_link"] = {{"bandwidth_bytes_per_s", 3.2e10}, {"latency_s", 1e-6}};
  const HardwareModel linked = HardwareModel::from_json(with_link);
  EXPECT_DOUBLE_EQ(linked.host_link.bandwidth_bytes_per_s, 3.2e10);
  EXPECT_EQ(linked.to_json(), with_link);
  // overheads likewise: absent, every fixed cost 0 (none of the presets has a measured one).
  EXPECT_FALSE(loaded.overheads.given());
  nlohmann::json with_overheads = cpu_local_json();
  with_overheads["overheads"] = {
      {"call_s", 4e-6}, {"item_s", 7e-6}, {"backward_call_s", 1e-5}, {"backward_item_s", 2e-5}};
  const HardwareModel costly = HardwareModel::from_json(with_overheads);
  EXPECT_DOUBLE_EQ(costly.overheads.attention_call_s(10, false), 4e-6 + 10 * 7e-6);
  EXPECT_DOUBLE_EQ(costly.overheads.attention_call_s(10, true), 1e-5 + 10 * 2e-5);
  EXPECT_EQ(costly.to_json(), with_overheads);
  for (const auto& name : hardware_preset_names()) EXPECT_FALSE(hardware_preset(name).overheads.given()) << name;
  EXPECT_EQ(load_hardware("a100-p4de").to_json(), hardware_preset("a100-p4de").to_json());

  const auto garbage = (dir / "garbage.json").string();
  std::ofstream(garbage) << "{ not json";
  EXPECT_NE(error_of([&] { load_hardware(garbage); }).find(garbage + ": not JSON: parse error at line 1"),
            std::string::npos)
      << error_of([&] { load_hardware(garbage); });
  // A bad field in a file: the error names the file, then the field.
  const auto bad = (dir / "bad.json").string();
  auto j = cpu_local_json();
  j["intra_node"]["latency_s"] = -1;
  std::ofstream(bad) << j.dump();
  EXPECT_EQ(error_of([&] { load_hardware(bad); }), bad + ": hardware.intra_node.latency_s = -1: must be in [0, 10]");
  std::filesystem::remove_all(dir);
  const std::string missing = error_of([] { load_hardware("/nonexistent/hw.json"); });
  EXPECT_NE(missing.find("neither a preset"), std::string::npos) << missing;
  EXPECT_NE(missing.find("h200-dgx"), std::string::npos) << missing;
}

// Applies `edit` to the cpu-local JSON and expects from_json to throw an Error containing `needle`.
void expect_error(const std::function<void(nlohmann::json&)>& edit, const std::string& needle) {
  nlohmann::json j = cpu_local_json();
  edit(j);
  const std::string message = error_of([&] { HardwareModel::from_json(j); });
  EXPECT_NE(message.find(needle), std::string::npos) << "message: '" << message << "'\nwanted: " << needle;
}

TEST(HardwareModel, BadFieldsAreNamed) {
  using J = nlohmann::json;
  expect_error([](J& j) { j["inter_node"]["bandwidth_bytes_per_s"] = -1.0; },
               "hardware.inter_node.bandwidth_bytes_per_s = -1.0: must be in [1000, 1000000000000000]");
  expect_error([](J& j) { j["intra_node"]["latency_s"] = -1e-6; }, "hardware.intra_node.latency_s");
  expect_error([](J& j) { j["devices_per_node"] = 0; }, "hardware.devices_per_node = 0: must be in [1, 1024]");
  expect_error([](J& j) { j["devices_per_node"] = 4.5; }, "hardware.devices_per_node = 4.5: must be an integer");
  expect_error([](J& j) { j["linear_mfu"] = 1.5; }, "hardware.linear_mfu = 1.5: must be in (0, 1]");
  expect_error([](J& j) { j["compute_slots_per_node"] = -1; },
               "hardware.compute_slots_per_node = -1: must be in [0, 1048576]");
  expect_error([](J& j) { j["peak_flops"] = 0.0; }, "hardware.peak_flops = 0");
  expect_error([](J& j) { j["memory_bandwidth"] = "fast"; }, "hardware.memory_bandwidth = \"fast\": must be a number");
  expect_error([](J& j) { j.erase("memory_bytes"); }, "hardware.memory_bytes: missing");
  expect_error([](J& j) { j["peak_flop"] = 1.0; }, "hardware.peak_flop: unknown field");
  expect_error([](J& j) { j["intra_node"]["bandwidth"] = 1.0; }, "hardware.intra_node.bandwidth: unknown field");
  expect_error(
      [](J& j) {
        j["host_link"] = {{"bandwidth_bytes_per_s", 0.0}, {"latency_s", 0.0}};
      },
      "hardware.host_link.bandwidth_bytes_per_s = 0");
  expect_error([](J& j) { j["name"] = ""; }, "hardware.name = \"\": must be a non-empty string");
  expect_error(
      [](J& j) {
        j["overheads"] = {{"call_s", 0.0}, {"item_s", -1e-6}, {"backward_call_s", 0.0}, {"backward_item_s", 0.0}};
      },
      "hardware.overheads.item_s = -1e-06: must be in [0, 10]");
  expect_error([](J& j) { j["overheads"] = {{"call_s", 0.0}}; }, "hardware.overheads.item_s: missing");
  expect_error(
      [](J& j) {
        j["attention"]["forward"]["flops_per_s"] = {1.0, 2.0};
      },
      "hardware.attention.forward: profile forward.flops_per_s");
  expect_error([](J& j) { j = J::array(); }, "hardware = []: must be an object");
  // Numbers that are positive and finite but make every modelled time infinite passed, then ended in a
  // "deadlock" from the simulator: a machine's numbers lie in ranges wide enough for any CPU or GPU.
  expect_error([](J& j) { j["intra_node"]["latency_s"] = 1e308; }, "hardware.intra_node.latency_s = 1e+308");
  expect_error([](J& j) { j["peak_flops"] = 1e-300; }, "hardware.peak_flops = 1e-300: must be in [1000000, 1e+18]");
  expect_error([](J& j) { j["memory_bandwidth"] = 1e300; }, "hardware.memory_bandwidth = 1e+300");
  expect_error([](J& j) { j["memory_bytes"] = 1e-300; }, "hardware.memory_bytes = 1e-300");
  expect_error([](J& j) { j["inter_node"]["bandwidth_bytes_per_s"] = 1e-300; },
               "hardware.inter_node.bandwidth_bytes_per_s = 1e-300");
  expect_error([](J& j) { j["attention"]["backward"]["flops_per_s"][0] = 1e-300; },
               "hardware.attention.backward.flops_per_s[0] = 1e-300: must be in [1000, 1e+18]");

  const std::string unknown = error_of([] { hardware_preset("b200"); });
  EXPECT_NE(unknown.find("'b200'"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("h200-dgx, a100-p4de"), std::string::npos) << unknown;
}

}  // namespace
}  // namespace fulcrum
