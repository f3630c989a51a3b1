#include "fulcrum/cost/hardware_model.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/core/input_file.hpp"
#include "fulcrum/core/json_reader.hpp"

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <utility>

namespace fulcrum {
namespace {

// Kernel tile (rows per block) of FlashAttention at head dim 128: the query block is 128 rows on both
// H100 and A100; the key block is 128 for causal H100 kernels (176 without a mask) and 64 on A100
// (flash-attention hopper/tile_size.h: tile_size_fwd_sm90 / tile_size_fwd_sm8x). One tile of 128 for
// both axes is the causal-H100 shape and a slight overestimate of the A100's short-key waste.
constexpr Tokens kGpuTile = 128;
// The longest shard the GPU presets tabulate: DistCA-scale documents (the grid saturates past it).
constexpr Tokens kLongestShard = 131072;
// One direction of an x16 slot as the GPU datasheets count it (both directions: 64 GB/s for Gen4, 128 GB/s
// for Gen5); the host-to-device weight stream of the prefill simulator's CPIP.
constexpr double kPcie4x16 = 32e9;
constexpr double kPcie5x16 = 64e9;
// NCCL's per-step latency of a ring/Simple over PCIe (src/graph/tuning.cc, hwLat[PCI][Ring][Simple]).
constexpr double kPcieHopLatency = 5.7e-6;

HardwareModel h200_dgx() {
  HardwareModel hw;
  hw.name = "h200-dgx";
  // DGX H200: 8 H200 SXM GPUs per system (https://www.nvidia.com/en-us/data-center/dgx-h200/).
  hw.devices_per_node = 8;
  // H200 SXM datasheet (https://www.nvidia.com/en-us/data-center/h200/): BF16 Tensor Core 1,979 TFLOPS
  // "with sparsity"; dense is half, 989.5 TFLOP/s (the same GH100 SMs and clocks as H100 SXM).
  hw.peak_flops = 1979e12 / 2;
  // Same datasheet: 141 GB HBM3e at 4.8 TB/s.
  hw.memory_bytes = 141e9;
  hw.memory_bandwidth = 4.8e12;
  // Same datasheet: NVLink 900 GB/s per GPU, which NVIDIA counts in both directions (18 NVLink 4 links
  // of 50 GB/s, 25 GB/s each way, per the H100 architecture whitepaper), so one direction is 450 GB/s.
  // Through NVSwitch one peer can get all of it. Latency: NCCL's per-hop NVLink latency for ring/Simple,
  // 3.4 us (NCCL src/graph/tuning.cc, hwLat[NVLINK][Ring][Simple]).
  hw.intra_node = {450e9, 3.4e-6};
  // DGX H200 spec page: 8 single-port ConnectX-7 at up to 400 Gb/s InfiniBand NDR, one per GPU:
  // 400e9 / 8 = 50 GB/s each way. Latency: NCCL's network hop for ring/Simple, 9.6 us (tuning.cc,
  // hwLat[NET][Ring][Simple]).
  hw.inter_node = {400e9 / 8, 9.6e-6};
  // H200 SXM datasheet: PCIe Gen5 128 GB/s, both directions: 64 GB/s host to device.
  hw.host_link = {kPcie5x16, 0};
  // Llama 3 (arXiv 2407.21783, Table 4): 380-430 TFLOP/s per H100, 38-43% BF16 MFU end to end, which also
  // pays for attention, communication and pipeline bubbles; the matrix layers alone run above that.
  hw.linear_mfu = 0.5;
  // FlashAttention-3 on H100 SXM5, BF16, head dim 128, 16k tokens, no mask (arXiv 2407.08608, §4.1,
  // forward-speed figure: 648 TFLOP/s; backward-speed figure: 561 TFLOP/s): 648 / 989.5 = 0.655 and
  // 561 / 989.5 = 0.567. The causal forward reaches 616 (its diagonal tiles are partly masked). H200 has
  // the same SMs and clocks as H100, so the same kernel reaches the same fraction of peak.
  hw.attention = tiled_attention_table(hw.peak_flops, 648.0 / 989.5, 561.0 / 989.5, kGpuTile);
  return hw;
}

HardwareModel a100_p4de() {
  HardwareModel hw;
  hw.name = "a100-p4de";
  // AWS p4de.24xlarge: 8 A100 80 GB, NVSwitch 600 GB/s, 400 Gbps EFA
  // (https://aws.amazon.com/ec2/instance-types/p4/).
  hw.devices_per_node = 8;
  // A100 datasheet (https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/
  // nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf): BF16 Tensor Core 312 TFLOPS dense (624 sparse);
  // A100 80GB SXM: 80 GB HBM2e at 2,039 GB/s.
  hw.peak_flops = 312e12;
  hw.memory_bytes = 80e9;
  hw.memory_bandwidth = 2039e9;
  // Same datasheet: NVLink 600 GB/s per GPU, both directions (12 NVLink 3 links of 25 GB/s each way),
  // so 300 GB/s one way. Latency as for h200-dgx (NCCL tuning.cc NVLink hop, 3.4 us).
  hw.intra_node = {300e9, 3.4e-6};
  // p4de: 4 x 100 Gbps EFA = 400 Gbps per instance, shared by 8 GPUs: 50 Gb/s = 6.25 GB/s each.
  // Latency: NCCL's generic network hop (9.6 us, as above); we found no EFA-specific figure.
  hw.inter_node = {400e9 / 8 / 8, 9.6e-6};
  // A100 datasheet: PCIe Gen4 64 GB/s, both directions: 32 GB/s host to device.
  hw.host_link = {kPcie4x16, 0};
  // Megatron-LM (Narayanan et al., arXiv 2104.04473, Table 1 / abstract): 44-52% of A100 peak end to end
  // (163 TFLOP/s per GPU, 502 PFLOP/s on 3072 GPUs for the 1T model); the matrix layers are its bulk.
  hw.linear_mfu = 0.5;
  // FlashAttention-2 on A100 80GB SXM4 (arXiv 2307.08691, abstract: 50-73% of peak; §4.1: up to 73% of
  // peak forward and 63% backward), the long-sequence, head dim 128 end of its speed figures.
  hw.attention = tiled_attention_table(hw.peak_flops, 0.73, 0.63, kGpuTile);
  return hw;
}

// MTraining's published setting: nodes of 8 A100-40GB with NVLink (300 GB/s one way) and 25 GB/s of
// InfiniBand per GPU. Compute and kernel efficiency as a100_p4de (same GPU); the 40 GB SXM part has
// 1,555 GB/s of HBM2 (A100 datasheet, as above).
HardwareModel a100_40g_ib() {
  HardwareModel hw = a100_p4de();
  hw.name = "a100-40g-ib";
  hw.memory_bytes = 40e9;
  hw.memory_bandwidth = 1555e9;
  hw.inter_node = {25e9, 9.6e-6};
  return hw;
}

// A800 80GB SXM: the A100 80GB SXM with NVLink cut to 400 GB/s, both directions (NVIDIA A800 product
// brief: BF16 312 TFLOPS dense, 80 GB HBM2e at 2,039 GB/s, NVLink 400 GB/s, PCIe Gen4 64 GB/s), so 200 GB/s
// one way; 8 per HGX node. Compute, kernel efficiency and latencies as a100_p4de (same GA100 chip). The
// inter-node link is not part of the GPU: we assume one 200 Gb/s HDR InfiniBand NIC per GPU (25 GB/s), as
// a100-40g-ib.
HardwareModel a800_sxm() {
  HardwareModel hw = a100_p4de();
  hw.name = "a800-sxm";
  hw.intra_node = {200e9, 3.4e-6};
  hw.inter_node = {25e9, 9.6e-6};
  return hw;
}

// A workstation of 4 GeForce RTX 3090 on PCIe 4.0 x16, no NVLink bridge: GPU-to-GPU traffic and the weight
// stream both cross PCIe. NVIDIA Ampere GA102 whitepaper (Appendix A, RTX 3090): peak BF16 Tensor TFLOPS
// with FP32 accumulate 71 dense (142 sparse); 24 GB GDDR6X at 936 GB/s; PCIe 4.0 x16.
HardwareModel rtx3090x4_pcie() {
  HardwareModel hw;
  hw.name = "rtx3090x4-pcie";
  hw.devices_per_node = 4;
  hw.peak_flops = 71e12;
  hw.memory_bytes = 24e9;
  hw.memory_bandwidth = 936e9;
  hw.intra_node = {kPcie4x16, kPcieHopLatency};
  // One 100 Gb/s Ethernet port per workstation, shared by its 4 GPUs: 3.125 GB/s each (an assumption: a
  // workstation's NIC is not part of any datasheet); NCCL's network hop latency as above.
  hw.inter_node = {100e9 / 8 / 4, 9.6e-6};
  hw.host_link = {kPcie4x16, 0};
  // No published end-to-end MFU for the 3090: the A100's 0.5 (same Ampere tensor cores per SM).
  hw.linear_mfu = 0.5;
  // No published FlashAttention-2 TFLOP/s for the 3090 either: the fraction of peak FA2 reaches on the A100
  // (0.73 forward, 0.63 backward; a100_p4de), assumed for the same kernel on the same architecture.
  hw.attention = tiled_attention_table(hw.peak_flops, 0.73, 0.63, kGpuTile);
  return hw;
}

using PresetFactory = HardwareModel (*)();
struct Preset {
  const char* name;
  PresetFactory make;
};
constexpr Preset kPresets[] = {{"h200-dgx", h200_dgx},
                               {"a100-p4de", a100_p4de},
                               {"a100-40g-ib", a100_40g_ib},
                               {"a800-sxm", a800_sxm},
                               {"rtx3090x4-pcie", rtx3090x4_pcie}};

void positive(std::string_view field, double value) {
  if (!(value > 0) || !std::isfinite(value)) fail("hardware.{} = {}: must be finite and > 0", field, value);
}

void check_link(std::string_view field, const LinkSpec& link) {
  positive(fmt::format("{}.bandwidth_bytes_per_s", field), link.bandwidth_bytes_per_s);
  if (!(link.latency_s >= 0) || !std::isfinite(link.latency_s)) {
    fail("hardware.{}.latency_s = {}: must be finite and >= 0", field, link.latency_s);
  }
}

// The ranges a hardware file's numbers must lie in: wide enough for any CPU or GPU (and the TP groups the
// simulator builds from them), narrow enough that every time the model computes stays finite. Without
// them a latency of 1e308 s or a peak of 1e-300 FLOP/s passed and ended in an infinite clock, reported
// as a deadlock. Hand-built models (tests in small units) are checked by validate() alone.
constexpr double kMinRate = 1e6, kMaxRate = 1e18;          // FLOP/s, bytes/s of memory
constexpr double kMinAttentionRate = 1e3;                  // FLOP/s of a (tiny, badly tiled) attention shard
constexpr double kMinLinkRate = 1e3, kMaxLinkRate = 1e15;  // bytes/s of a link
constexpr double kMaxLatency = 10;                         // seconds
constexpr double kMinMemory = 1e6, kMaxMemory = 1e16;      // bytes
constexpr int kMaxDevicesPerNode = 1024;
constexpr int kMaxComputeSlots = 1 << 20;

LinkSpec link_from_json(const JsonValue& link) {
  link.only_keys({"bandwidth_bytes_per_s", "latency_s"});
  return {link.at("bandwidth_bytes_per_s").number(kMinLinkRate, kMaxLinkRate),
          link.at("latency_s").number(0, kMaxLatency)};
}

// CallOverheads' fields by their JSON names, as references (const ones for a const CallOverheads).
template <typename Overheads>
auto overhead_fields(Overheads& o) {
  using Field = std::pair<const char*, decltype((o.call_s))>;
  return std::array<Field, 4>{{{"call_s", o.call_s},
                               {"item_s", o.item_s},
                               {"backward_call_s", o.backward_call_s},
                               {"backward_item_s", o.backward_item_s}}};
}

nlohmann::json link_to_json(const LinkSpec& link) {
  return {{"bandwidth_bytes_per_s", link.bandwidth_bytes_per_s}, {"latency_s", link.latency_s}};
}

}  // namespace

void HardwareModel::validate() const {
  if (name.empty()) fail("hardware.name: must not be empty");
  if (devices_per_node < 1) fail("hardware.devices_per_node = {}: must be >= 1", devices_per_node);
  positive("peak_flops", peak_flops);
  positive("memory_bytes", memory_bytes);
  positive("memory_bandwidth", memory_bandwidth);
  check_link("intra_node", intra_node);
  check_link("inter_node", inter_node);
  if (has_host_link()) check_link("host_link", host_link);
  if (!(linear_mfu > 0 && linear_mfu <= 1)) fail("hardware.linear_mfu = {}: must be in (0, 1]", linear_mfu);
  if (compute_slots_per_node < 0) fail("hardware.compute_slots_per_node = {}: must be >= 0", compute_slots_per_node);
  for (const auto& [field, seconds] : overhead_fields(overheads)) {
    if (!(seconds >= 0 && seconds <= kMaxLatency)) {
      fail("hardware.overheads.{} = {}: must be in [0, {}]", field, seconds, kMaxLatency);
    }
  }
  attention.forward().validate("hardware.attention.forward");
  attention.backward().validate("hardware.attention.backward");
}

nlohmann::json CallOverheads::to_json() const {
  nlohmann::json json = nlohmann::json::object();
  for (const auto& [field, seconds] : overhead_fields(*this)) json[field] = seconds;
  return json;
}

const LinkSpec& HardwareModel::link(int rank_a, int rank_b) const {
  if (rank_a < 0 || rank_b < 0) fail("link({}, {}): ranks must be >= 0", rank_a, rank_b);
  return rank_a / devices_per_node == rank_b / devices_per_node ? intra_node : inter_node;
}

nlohmann::json HardwareModel::to_json() const {
  nlohmann::json json = {{"name", name},
                         {"devices_per_node", devices_per_node},
                         {"peak_flops", peak_flops},
                         {"memory_bytes", memory_bytes},
                         {"memory_bandwidth", memory_bandwidth},
                         {"intra_node", link_to_json(intra_node)},
                         {"inter_node", link_to_json(inter_node)},
                         {"linear_mfu", linear_mfu},
                         {"compute_slots_per_node", compute_slots_per_node},
                         {"attention", attention.to_json()}};
  if (has_host_link()) json["host_link"] = link_to_json(host_link);
  if (overheads.given()) json["overheads"] = overheads.to_json();
  return json;
}

HardwareModel HardwareModel::from_json(const JsonValue& json) {
  json.only_keys({"name", "devices_per_node", "peak_flops", "memory_bytes", "memory_bandwidth", "intra_node",
                  "inter_node", "host_link", "linear_mfu", "compute_slots_per_node", "overheads", "attention"});
  HardwareModel hw;
  hw.name = json.at("name").string();
  if (hw.name.empty()) json.at("name").fail_must("a non-empty string");
  hw.devices_per_node = json.at("devices_per_node").integer<int>(1, kMaxDevicesPerNode);
  hw.peak_flops = json.at("peak_flops").number(kMinRate, kMaxRate);
  hw.memory_bytes = json.at("memory_bytes").number(kMinMemory, kMaxMemory);
  hw.memory_bandwidth = json.at("memory_bandwidth").number(kMinRate, kMaxRate);
  hw.intra_node = link_from_json(json.at("intra_node"));
  hw.inter_node = link_from_json(json.at("inter_node"));
  // Optional (calibrations of CPU boxes lack it): {0, 0}, not given.
  if (json.has("host_link")) hw.host_link = link_from_json(json.at("host_link"));
  const JsonValue mfu = json.at("linear_mfu");
  hw.linear_mfu = mfu.number();
  if (!(hw.linear_mfu > 0 && hw.linear_mfu <= 1)) mfu.fail_must("in (0, 1]");
  hw.compute_slots_per_node = json.at("compute_slots_per_node").integer<int>(0, kMaxComputeSlots);
  if (json.has("overheads")) {  // optional: {0, 0}, not given
    const JsonValue overheads = json.at("overheads");
    overheads.only_keys({"call_s", "item_s", "backward_call_s", "backward_item_s"});
    for (auto& [field, seconds] : overhead_fields(hw.overheads)) seconds = overheads.at(field).number(0, kMaxLatency);
  }
  hw.attention = ProfileTable::from_json(json.at("attention"));
  // A machine's kernel rates, like its peak (a profile table alone may be in any unit).
  for (const char* pass : {"forward", "backward"}) {
    for (const auto& v : json.at("attention").at(pass).at("flops_per_s").elements())
      v.number(kMinAttentionRate, kMaxRate);
  }
  hw.validate();
  return hw;
}

HardwareModel HardwareModel::from_json(const nlohmann::json& json) {
  return from_json(JsonValue(json, "", "hardware"));
}

HardwareModel hardware_preset(std::string_view name) {
  for (const auto& preset : kPresets) {
    if (preset.name == name) return preset.make();
  }
  fail("hardware = '{}': unknown preset; choose one of {}", name, fmt::join(hardware_preset_names(), ", "));
}

std::vector<std::string> hardware_preset_names() {
  std::vector<std::string> names;
  for (const auto& preset : kPresets) names.emplace_back(preset.name);
  return names;
}

HardwareModel load_hardware(const std::string& path_or_preset) {
  for (const auto& preset : kPresets) {
    if (preset.name == path_or_preset) return preset.make();
  }
  std::error_code ec;
  const std::string path = bundled_path(path_or_preset);
  if (!std::ifstream(path) || std::filesystem::is_directory(path, ec)) {
    fail("hardware = '{}': neither a preset ({}) nor a readable file", path_or_preset,
         fmt::join(hardware_preset_names(), ", "));
  }
  return HardwareModel::from_json(JsonDocument::read_file(path_or_preset, "hardware").root());
}

ProfileTable tiled_attention_table(double peak_flops, double eff_forward, double eff_backward, Tokens tile) {
  if (!(peak_flops > 0) || !std::isfinite(peak_flops)) fail("attention peak_flops = {}: must be > 0", peak_flops);
  if (!(eff_forward > 0 && eff_forward <= 1)) fail("attention eff_forward = {}: must be in (0, 1]", eff_forward);
  if (!(eff_backward > 0 && eff_backward <= 1)) fail("attention eff_backward = {}: must be in (0, 1]", eff_backward);
  if (tile < 1 || tile > kLongestShard) fail("attention tile = {}: must be in [1, {}]", tile, kLongestShard);
  std::vector<Tokens> lengths;
  for (Tokens l = 1; l < tile; l *= 2) lengths.push_back(l);
  for (Tokens l = tile;; l *= 2) {
    lengths.push_back(l);
    if (l >= kLongestShard) break;
  }
  // Useful rows over paid rows: L / (ceil(L / tile) * tile); exactly 1 at the multiples of the tile.
  auto occupancy = [tile](Tokens l) {
    const Tokens paid = (l + tile - 1) / tile * tile;
    return static_cast<double>(l) / static_cast<double>(paid);
  };
  ProfileTable table;
  ThroughputGrid forward{lengths, lengths, {}};
  ThroughputGrid backward{lengths, lengths, {}};
  for (Tokens q : lengths) {
    for (Tokens k : lengths) {
      const double shape = occupancy(q) * occupancy(k);
      forward.flops_per_s.push_back(peak_flops * eff_forward * shape);
      backward.flops_per_s.push_back(peak_flops * eff_backward * shape);
    }
  }
  table.forward() = std::move(forward);
  table.backward() = std::move(backward);
  return table;
}

}  // namespace fulcrum
