// The machine the simulator runs plans on: per-device compute, memory and links, and the attention
// kernel's throughput per shard shape. Two GPU presets carry datasheet numbers (sources in
// hardware_model.cpp); any other machine, such as the CPU box `fulcrum profile` measures, is a JSON file
// with the same fields, so a calibration and a preset are interchangeable.
//
// JSON schema (every field required, unknown fields rejected so a typo is an error, not a default):
//   {
//     "name": "cpu-local",
//     "devices_per_node": 4,                  // ranks sharing the fast link; rank r is on node r / this
//     "compute_slots_per_node": 2,            // 0 for GPUs; n: the node's devices share n compute units
//     "peak_flops": 2.0e12,                   // FLOP/s per device (dense bf16; fp32 for a CPU)
//     "memory_bytes": 6.4e10,                 // capacity per device
//     "memory_bandwidth": 5.0e10,             // bytes/s per device, for copies and reductions
//     "intra_node": {"bandwidth_bytes_per_s": 1e10, "latency_s": 1e-6},  // one direction, per device
//     "inter_node": {"bandwidth_bytes_per_s": 1e10, "latency_s": 1e-6},  // CPU-local: same as intra
//     "host_link": {"bandwidth_bytes_per_s": 3.2e10, "latency_s": 0},    // optional: host memory to device
//     "linear_mfu": 0.5,                      // fraction of peak the QKV/O/MLP matrices achieve
//     "overheads": {"call_s": 4e-6, "item_s": 7e-6, "backward_call_s": 1e-5, "backward_item_s": 2e-5},
//                                             // optional: fixed costs per call and per item (CallOverheads)
//     "attention": {"forward": GRID, "backward": GRID}  // ProfileTable JSON, as `fulcrum profile` writes
//   }
//   GRID = {"query_lengths": [...], "key_lengths": [...], "flops_per_s": [row-major q x k]}
// `HardwareModel::to_json` writes exactly this, so `from_json(to_json())` is the identity. The two optional
// fields stay 0 ("not given") when absent, and to_json then leaves them out: host_link (what the prefill
// simulator streams weights over; without it, it reads a machine's weights at memory_bandwidth, a CPU box
// whose "device" memory is host memory) and overheads (without them, a call costs only its work).
#pragma once

#include "fulcrum/core/interval.hpp"
#include "fulcrum/core/json_reader.hpp"
#include "fulcrum/cost/profile_table.hpp"

#include <nlohmann/json_fwd.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace fulcrum {

/// Fixed costs of a compute call apart from its work: per call (a kernel launch and the framework's per-call
/// work; copies and reductions pay the forward one) and per attention item (a document's piece inside a fused
/// call: its task's setup and its first tile, whatever its size), for forward and backward calls. All 0: not
/// given (the GPU presets: no measured source).
struct CallOverheads {
  double call_s = 0, item_s = 0;
  double backward_call_s = 0, backward_item_s = 0;
  double attention_call_s(std::size_t items, bool backward) const {
    return backward ? backward_call_s + static_cast<double>(items) * backward_item_s
                    : call_s + static_cast<double>(items) * item_s;
  }
  bool given() const { return call_s != 0 || item_s != 0 || backward_call_s != 0 || backward_item_s != 0; }
  /// The hardware file's "overheads" object (what `fulcrum profile` writes too).
  nlohmann::json to_json() const;
};

/// One direction of one device's port: a message of b bytes takes latency_s + b / bandwidth_bytes_per_s.
struct LinkSpec {
  double bandwidth_bytes_per_s = 0;
  double latency_s = 0;
  double transfer_s(double bytes) const { return latency_s + bytes / bandwidth_bytes_per_s; }
};

struct HardwareModel {
  std::string name;
  int devices_per_node = 8;
  double peak_flops = 0;        // dense bf16 (fp32 for a CPU) FLOP/s per device
  double memory_bytes = 0;      // per device
  double memory_bandwidth = 0;  // bytes/s per device
  LinkSpec intra_node;          // NVLink/NVSwitch per GPU (shared memory for a CPU box)
  LinkSpec inter_node;          // the NIC share of one GPU (a CPU box: same as intra)
  LinkSpec host_link;           // host memory -> device, one direction (PCIe for a GPU); {0, 0}: not given
  double linear_mfu = 0.5;      // model FLOP utilisation of the matrix layers (QKV, O, MLP)
  /// 0: every device computes on its own (GPUs). n > 0: the devices of a node share n compute units, so
  /// k busy devices each run at min(1, n / k) of their speed (MPI ranks oversubscribing a CPU's cores).
  int compute_slots_per_node = 0;
  CallOverheads overheads;  // measured by `fulcrum profile`; all 0: not given
  ProfileTable attention;   // core-attention throughput per (query length, key length), fwd and bwd

  /// Throws fulcrum::Error naming the field ("hardware.inter_node.bandwidth_bytes_per_s = -1: ...").
  void validate() const;

  double attention_forward_s(Tokens q_len, Tokens k_len, double flops) const {
    return attention.forward_s(q_len, k_len, flops);
  }
  double attention_backward_s(Tokens q_len, Tokens k_len, double flops) const {
    return attention.backward_s(q_len, k_len, flops);
  }
  bool has_host_link() const { return host_link.bandwidth_bytes_per_s != 0 || host_link.latency_s != 0; }
  double linear_s(double flops) const { return flops / (peak_flops * linear_mfu); }
  /// `bytes` is memory traffic: a copy of n bytes reads n and writes n, so the caller passes 2n.
  double copy_s(double bytes) const { return bytes / memory_bandwidth; }
  /// The link between two ranks: intra_node when they share a node (rank / devices_per_node).
  const LinkSpec& link(int rank_a, int rank_b) const;

  nlohmann::json to_json() const;
  /// Validates; malformed or unknown fields throw fulcrum::Error naming the field.
  static HardwareModel from_json(const nlohmann::json& json);
  /// From a JSON reader cursor (core/json_reader.hpp): errors name its file and path.
  static HardwareModel from_json(const JsonValue& json);
};

/// "h200-dgx", "a100-p4de", "a100-40g-ib", "a800-sxm", "rtx3090x4-pcie"; an unknown name throws an Error listing the
/// presets.
HardwareModel hardware_preset(std::string_view name);
std::vector<std::string> hardware_preset_names();
/// A preset name, else the path of a JSON file in the schema above (e.g. a cpu-local calibration).
HardwareModel load_hardware(const std::string& path_or_preset);

/// The GPU presets' attention table: a grid over query/key lengths up to 131072 whose throughput is
/// peak * eff_forward (eff_backward for backward) scaled down for shards shorter than the kernel tile:
/// a kernel computes whole tiles, so a q or k length L < tile pays for `tile` rows and achieves L / tile
/// of the full-tile rate (q and k factors multiply). The axes hold every power of two below the tile
/// (where the rate is exactly L / tile, and linear interpolation between them is exact) and the tile
/// times powers of two above it (full tiles, the full rate), so throughput never falls as a shard grows;
/// the partial last tile of a shard longer than one tile is not modelled (it costs under one tile in
/// ceil(L / tile), and an interpolated saw-tooth would make longer shards look slower).
ProfileTable tiled_attention_table(double peak_flops, double eff_forward, double eff_backward, Tokens tile);

}  // namespace fulcrum
