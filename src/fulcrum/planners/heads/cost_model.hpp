// FlexAttn's per-layer cost model, shared by the head solvers, `fulcrum heads`, the prefill report and the
// simulator. One layer is solved on its own:
//   T_layer = max over devices d of time_d,   time_d = max(compute_d, offload_d)
//   compute_d = Σ_{heads i on d} (t_attn(i) + t_qo) + (t_qkvo - t_qo) x (KV groups with a head on d)
// i.e. the first head of a KV group on a device pays t_qkvo (its group's K/V projection), the others t_qo:
// a group split over devices pays its K/V projection once per device. offload_d (optional, 0 when off) is
// the device-to-host copy of the KV caches of d's groups, which overlaps compute and so only counts where
// it is longer.
//
// Head times come from a runtime profile (measured per pattern key on a grid of prompt lengths, linear in
// between) or, without one, from an analytic fallback: the pattern's visible pairs (to_mask(..., seed 0)
// .document_pairs) x 4 x head_dim FLOPs at a stated rate, and projections as GEMM FLOPs at another.
#pragma once

#include "fulcrum/core/interval.hpp"
#include "fulcrum/core/json_reader.hpp"
#include "fulcrum/planners/heads/patterns.hpp"

#include <nlohmann/json_fwd.hpp>

#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace fulcrum::heads {

/// Device of each q head (index = q head, value in [0, devices)). What every solver returns and what the
/// prefill runtime lays its weights out for.
using HeadAssignment = std::vector<int>;

/// One layer's problem: the costs a solver balances.
struct LayerCosts {
  std::vector<double> attention_s;  // t_attn per q head
  int group_size = 1;               // q heads per KV group (q_heads / kv_heads); group of head h = h / group_size
  double qkvo_s = 0;                // Q, K, V and O projections of one head (the group's first on a device)
  double qo_s = 0;                  // Q and O projections only (the others), <= qkvo_s
  double offload_per_group_s = 0;   // device-to-host copy of one KV group's cache; 0: no offload term

  int heads() const { return static_cast<int>(attention_s.size()); }
  int groups() const { return heads() / group_size; }
  int group_of(int head) const { return head / group_size; }
  /// What a group pays once per device it is on: its K/V projection.
  double kv_s() const { return qkvo_s - qo_s; }
  /// Bad input naming the field: no heads, heads not a multiple of group_size, negative or non-finite
  /// times, qo_s > qkvo_s.
  void validate() const;
};

/// Per device: compute, offload and their max (the device's time).
struct DeviceTimes {
  std::vector<double> compute_s;
  std::vector<double> offload_s;
  std::vector<double> time_s;
  double layer_s() const;  // max of time_s
  double spread() const;   // (max - min) / max of time_s; 0 for an idle layer
};
/// The cost of an assignment (its devices must be in [0, devices); FULCRUM_CHECK otherwise).
DeviceTimes device_times(const LayerCosts& costs, std::span<const int> assignment, int devices);
double layer_time(const LayerCosts& costs, std::span<const int> assignment, int devices);

/// max(largest head + t_qkvo, (Σ (t_attn + t_qo) + groups x (t_qkvo - t_qo)) / D, ceil(groups / D) x offload):
/// the max(max head, Σ / D) with the GQA rule (every group pays its K/V projection at least once,
/// a device holding head i pays t_qkvo for i or for an earlier head of its group).
double lower_bound_simple(const LayerCosts& costs, int devices);
/// The simple, pigeonhole and split bounds (below), cheap enough to compute inside every solve.
double lower_bound_quick(const LayerCosts& costs, int devices);
/// The simple bound and the pigeonhole bounds: among the k·D + 1 costliest heads (by t_attn + t_qo) some
/// device holds k + 1, so it takes at least the k + 1 cheapest of them plus one K/V projection. Tighter
/// when a few heavy heads do not divide evenly over the devices (9 full heads on 4 devices).
/// ... and the split bound (split_lower_bound), and the pieces bound (pieces_lower_bound).
double lower_bound(const LayerCosts& costs, int devices);
/// Splitting KV groups costs K/V projections, and keeping them whole may not balance. In any assignment
/// with s extra pieces (group-device pairs beyond one per group): the total is work + s x (t_qkvo - t_qo);
/// at least groups - s groups are whole, so some device holds ceil((groups - s) / D) of them; and at most
/// min(D, 2s) devices hold pieces of split groups, the others whole groups only, i.e. at most M(T) (the
/// largest sum of as many groups as fit under T). The least T for which some s passes all three (found by
/// bisection; every test grows with T). Tight where whole groups do not divide over the devices (9 groups
/// on 4 devices).
double split_lower_bound(const LayerCosts& costs, int devices);

/// Heavy heads (those above the steepest drop, at least 2x, in t_attn + t_qo among the 3·D heaviest: FULL
/// among sparse heads) fix how many pieces (KV group x device) each device pays. Per device: f heavy heads
/// in q pieces (q <= f <= q x the most heavy heads of one group), p >= q pieces in all, holding at most
/// p x group_size heads; its compute is at least the f lightest heavy heads + the lightest light ones + p x
/// (t_qkvo - t_qo). Over devices: f sums to the heavy heads, Σ (f - q) <= heavy heads - groups holding one
/// (each such group is on at least one device), every light head is held, and the total work plus
/// max(Σ p, groups) K/V projections fits D x T. pieces_allow: whether this relaxation admits T (a DP over
/// devices: heavy heads, savings f - q, pieces -> most light heads held); false proves every assignment
/// slower than T. pieces_lower_bound: the least T it admits, bisected from `floor` (a known lower bound) to a
/// relative 1e-6, rounded down.
bool pieces_allow(const LayerCosts& costs, int devices, double t);
double pieces_lower_bound(const LayerCosts& costs, int devices, double floor);

/// Measured head times on a grid of prompt lengths (JSON, written by profiling, read by `--profile`):
///   { "device": "...",                       optional, what was measured
///     "prompt_tokens": [8192, 16384, ...],   ascending, at least one
///     "extrapolate": false,                  optional: true allows lengths outside the grid (linear from
///                                            the nearest two points, clamped at 0); false makes them errors
///     "t_qkvo_s": [...], "t_qo_s": [...],    per grid point, seconds
///     "attention_s": { "PATTERN KEY": [...], ... } }   per pattern key (HeadPattern::key), per grid point
class RuntimeProfile {
 public:
  std::string device;
  std::vector<Tokens> prompt_tokens;
  bool extrapolate = false;
  std::vector<double> qkvo_s;
  std::vector<double> qo_s;
  std::map<std::string, std::vector<double>> attention_s;

  static RuntimeProfile from_json(const JsonValue& root);
  static RuntimeProfile load(const std::string& path);
  nlohmann::json to_json() const;

  /// Bad input naming the pattern key (and listing the profiled ones) or the prompt length outside the grid.
  double attention(const HeadPattern& pattern, Tokens prompt_len) const;
  double qkvo(Tokens prompt_len) const;
  double qo(Tokens prompt_len) const;

 private:
  double interpolate(const std::vector<double>& values, Tokens prompt_len, std::string_view what) const;
};

/// The fallback without a profile: times from FLOPs at stated rates. Defaults: Llama-3-8B's head dim 128 and
/// hidden 4096; 300 TFLOP/s for attention and 600 TFLOP/s for projection GEMMs (an H100-class GPU: attention
/// kernels run at about half a GEMM's rate). Only the ratios matter to the solvers.
struct AnalyticHeadCost {
  int head_dim = 128;
  int hidden = 4096;
  double attention_flops_per_s = 300e12;
  double gemm_flops_per_s = 600e12;

  double attention(const HeadPattern& pattern, Tokens prompt_len) const;
  /// Q and O projections of one head: 2 GEMMs of 2 x prompt x hidden x head_dim FLOPs.
  double qo(Tokens prompt_len) const;
  /// Plus the K and V projections of its KV head (same shapes).
  double qkvo(Tokens prompt_len) const { return 2.0 * qo(prompt_len); }
};

/// Where head times come from: a profile when given, else the analytic model.
struct HeadCostModel {
  std::optional<RuntimeProfile> profile;
  AnalyticHeadCost analytic;
  double offload_per_group_s = 0;

  /// One layer's costs; each distinct pattern is costed once.
  LayerCosts layer(const LayerPatterns& patterns, int kv_heads, Tokens prompt_len) const;
};

}  // namespace fulcrum::heads
