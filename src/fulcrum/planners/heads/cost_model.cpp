#include "fulcrum/planners/heads/cost_model.hpp"

#include "fulcrum/core/error.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

namespace fulcrum::heads {

void LayerCosts::validate() const {
  if (attention_s.empty()) fail("heads = 0: a layer needs at least one q head");
  if (group_size < 1 || heads() % group_size != 0) {
    fail("group size = {}: must divide the layer's q heads = {} (q_heads / kv_heads)", group_size, heads());
  }
  for (std::size_t i = 0; i < attention_s.size(); ++i) {
    if (!std::isfinite(attention_s[i]) || attention_s[i] < 0) {
      fail("attention time of head {} = {}: must be finite and >= 0", i, attention_s[i]);
    }
  }
  if (!std::isfinite(qo_s) || qo_s < 0) fail("t_qo = {}: must be finite and >= 0", qo_s);
  if (!std::isfinite(qkvo_s) || qkvo_s < qo_s) fail("t_qkvo = {}: must be finite and >= t_qo = {}", qkvo_s, qo_s);
  if (!std::isfinite(offload_per_group_s) || offload_per_group_s < 0) {
    fail("offload time per group = {}: must be finite and >= 0", offload_per_group_s);
  }
}

double DeviceTimes::layer_s() const { return time_s.empty() ? 0.0 : *std::max_element(time_s.begin(), time_s.end()); }

double DeviceTimes::spread() const {
  const double hi = layer_s();
  if (hi <= 0) return 0.0;
  return (hi - *std::min_element(time_s.begin(), time_s.end())) / hi;
}

DeviceTimes device_times(const LayerCosts& costs, std::span<const int> assignment, int devices) {
  FULCRUM_CHECK(static_cast<int>(assignment.size()) == costs.heads(), "assignment of {} heads for {}",
                assignment.size(), costs.heads());
  const auto d_count = static_cast<std::size_t>(devices);
  DeviceTimes t{std::vector<double>(d_count, 0.0), std::vector<double>(d_count, 0.0), {}};
  std::vector<char> present(d_count * static_cast<std::size_t>(costs.groups()), 0);
  for (int h = 0; h < costs.heads(); ++h) {
    const int d = assignment[static_cast<std::size_t>(h)];
    FULCRUM_CHECK(d >= 0 && d < devices, "head {} on device {} of {}", h, d, devices);
    const auto du = static_cast<std::size_t>(d);
    char& seen = present[du * static_cast<std::size_t>(costs.groups()) + static_cast<std::size_t>(costs.group_of(h))];
    t.compute_s[du] += costs.attention_s[static_cast<std::size_t>(h)] + (seen ? costs.qo_s : costs.qkvo_s);
    if (!seen) t.offload_s[du] += costs.offload_per_group_s;
    seen = 1;
  }
  t.time_s.resize(d_count);
  for (std::size_t d = 0; d < d_count; ++d) t.time_s[d] = std::max(t.compute_s[d], t.offload_s[d]);
  return t;
}

double layer_time(const LayerCosts& costs, std::span<const int> assignment, int devices) {
  return device_times(costs, assignment, devices).layer_s();
}

double lower_bound_simple(const LayerCosts& costs, int devices) {
  double largest = 0;
  double total = costs.kv_s() * costs.groups();
  for (double a : costs.attention_s) {
    largest = std::max(largest, a + costs.qkvo_s);
    total += a + costs.qo_s;
  }
  const int groups_per_device = (costs.groups() + devices - 1) / devices;
  return std::max({largest, total / devices, groups_per_device * costs.offload_per_group_s});
}

namespace {

// Whether some assignment could finish by T as far as the split argument sees (split_lower_bound).
bool splits_allow(const LayerCosts& costs, int devices, const std::vector<double>& weight, double work, double t) {
  const int groups = costs.groups();
  // M(T): an upper bound on the load of a device holding whole groups only: the k largest weights, k the
  // most groups that fit under T (the k smallest), and at most T.
  int fit = 0;
  double small = 0;
  while (fit < groups && small + weight[static_cast<std::size_t>(fit)] <= t)
    small += weight[static_cast<std::size_t>(fit++)];
  double large = 0;
  for (int k = 0; k < fit; ++k) large += weight[static_cast<std::size_t>(groups - 1 - k)];
  const double whole_only = std::min(t, large);
  const int max_extra = costs.heads() - groups;  // at most one piece per head
  for (int s = 0; s <= max_extra; ++s) {
    const double total = work + s * costs.kv_s();
    if (total > devices * t) break;  // more pieces only add work
    // At least groups - s groups are whole: some device holds ceil((groups - s) / D) of them.
    const int whole = groups - std::min(s, groups);
    const int per_device = (whole + devices - 1) / devices;
    double smallest = 0;
    for (int k = 0; k < per_device; ++k) smallest += weight[static_cast<std::size_t>(k)];
    if (smallest > t) continue;
    // At most 2s pieces of split groups, so at most min(D, 2s) devices hold any; the others whole groups only.
    const int with_pieces = std::min(devices, 2 * s);
    if (with_pieces * t + (devices - with_pieces) * whole_only >= total) return true;
  }
  return false;
}

}  // namespace

double split_lower_bound(const LayerCosts& costs, int devices) {
  std::vector<double> weight(static_cast<std::size_t>(costs.groups()), costs.kv_s());
  for (int h = 0; h < costs.heads(); ++h) {
    weight[static_cast<std::size_t>(costs.group_of(h))] += costs.attention_s[static_cast<std::size_t>(h)] + costs.qo_s;
  }
  std::sort(weight.begin(), weight.end());
  const double work = std::accumulate(weight.begin(), weight.end(), 0.0);
  // Feasibility grows with T; everything on one device is feasible. Bisect to a relative 1e-13.
  double lo = work / devices;
  double hi = work;
  if (splits_allow(costs, devices, weight, work, lo)) return lo;
  while (hi - lo > 1e-13 * hi) {
    const double mid = 0.5 * (lo + hi);
    (splits_allow(costs, devices, weight, work, mid) ? hi : lo) = mid;
  }
  return lo;
}

double lower_bound(const LayerCosts& costs, int devices) {
  const double quick = lower_bound_quick(costs, devices);
  return std::max(quick, pieces_lower_bound(costs, devices, quick));
}

double lower_bound_quick(const LayerCosts& costs, int devices) {
  std::vector<double> items;
  items.reserve(costs.attention_s.size());
  for (double a : costs.attention_s) items.push_back(a + costs.qo_s);
  std::sort(items.begin(), items.end(), std::greater<>());
  double bound = lower_bound_simple(costs, devices);
  // Among the k·D + 1 largest items some device holds k + 1; it takes at least the k + 1 smallest of them.
  for (std::size_t k = 1; k * static_cast<std::size_t>(devices) + 1 <= items.size(); ++k) {
    const std::size_t last = k * static_cast<std::size_t>(devices);  // index of the (kD+1)-th largest
    double sum = costs.kv_s();
    for (std::size_t j = last - k; j <= last; ++j) sum += items[j];
    bound = std::max(bound, sum);
  }
  return std::max(bound, split_lower_bound(costs, devices));
}

// ---- runtime profile ----

RuntimeProfile RuntimeProfile::from_json(const JsonValue& root) {
  root.only_keys({"device", "prompt_tokens", "extrapolate", "t_qkvo_s", "t_qo_s", "attention_s"});
  RuntimeProfile p;
  if (auto v = root.find("device")) p.device = v->string();
  if (auto v = root.find("extrapolate")) p.extrapolate = v->boolean();
  const JsonValue grid = root.at("prompt_tokens");
  for (const JsonValue& t : grid.elements(1, JsonValue::kAnySize, "an array of at least one prompt length")) {
    const Tokens len = t.integer<Tokens>(1, kMaxPatternTokens);
    if (!p.prompt_tokens.empty() && len <= p.prompt_tokens.back()) t.fail_must("larger than the length before it");
    p.prompt_tokens.push_back(len);
  }
  if (p.extrapolate && p.prompt_tokens.size() < 2) grid.fail_must("at least two lengths when extrapolate is true");
  const std::size_t n = p.prompt_tokens.size();
  auto series = [&](const JsonValue& v) {
    std::vector<double> out;
    for (const JsonValue& x : v.elements(n, n, fmt::format("an array of {} times (one per prompt_tokens)", n))) {
      out.push_back(x.number(0.0));
    }
    return out;
  };
  p.qkvo_s = series(root.at("t_qkvo_s"));
  p.qo_s = series(root.at("t_qo_s"));
  const JsonValue patterns = root.at("attention_s");
  if (!patterns.json().is_object() || patterns.json().empty()) patterns.fail_must("an object of pattern keys");
  for (const auto& item : patterns.json().items()) {
    const JsonValue v = patterns.at(item.key());
    std::string key;
    try {
      key = HeadPattern::parse(item.key()).key();
    } catch (const Error& e) {
      v.fail_here(e.what());
    }
    p.attention_s[key] = series(v);
  }
  return p;
}

RuntimeProfile RuntimeProfile::load(const std::string& path) {
  const JsonDocument doc = JsonDocument::read_file(path, "profile");
  return from_json(doc.root());
}

nlohmann::json RuntimeProfile::to_json() const {
  nlohmann::json j = {{"prompt_tokens", prompt_tokens},
                      {"extrapolate", extrapolate},
                      {"t_qkvo_s", qkvo_s},
                      {"t_qo_s", qo_s},
                      {"attention_s", attention_s}};
  if (!device.empty()) j["device"] = device;
  return j;
}

double RuntimeProfile::interpolate(const std::vector<double>& values, Tokens prompt_len, std::string_view what) const {
  const Tokens lo = prompt_tokens.front();
  const Tokens hi = prompt_tokens.back();
  if ((prompt_len < lo || prompt_len > hi) && !extrapolate) {
    fail(
        "prompt tokens = {}: outside the runtime profile's grid [{}, {}] for {} (a profile with \"extrapolate\": "
        "true allows it)",
        prompt_len, lo, hi, what);
  }
  if (prompt_tokens.size() == 1) return values[0];
  // The segment holding prompt_len, or the nearest one outside the grid.
  const auto upper = std::upper_bound(prompt_tokens.begin(), prompt_tokens.end(), prompt_len);
  const std::size_t i1 =
      std::clamp<std::size_t>(static_cast<std::size_t>(upper - prompt_tokens.begin()), 1, prompt_tokens.size() - 1);
  const std::size_t i0 = i1 - 1;
  const double x0 = static_cast<double>(prompt_tokens[i0]);
  const double x1 = static_cast<double>(prompt_tokens[i1]);
  const double w = (static_cast<double>(prompt_len) - x0) / (x1 - x0);
  return std::max(0.0, values[i0] + w * (values[i1] - values[i0]));
}

double RuntimeProfile::attention(const HeadPattern& pattern, Tokens prompt_len) const {
  const std::string key = pattern.key();
  const auto it = attention_s.find(key);
  if (it == attention_s.end()) {
    std::vector<std::string> keys;
    for (const auto& [k, v] : attention_s) keys.push_back(k);
    fail("pattern '{}': not in the runtime profile; it has {}", key, fmt::join(keys, ", "));
  }
  return interpolate(it->second, prompt_len, key);
}

double RuntimeProfile::qkvo(Tokens prompt_len) const { return interpolate(qkvo_s, prompt_len, "t_qkvo"); }
double RuntimeProfile::qo(Tokens prompt_len) const { return interpolate(qo_s, prompt_len, "t_qo"); }

// ---- analytic fallback ----

double AnalyticHeadCost::attention(const HeadPattern& pattern, Tokens prompt_len) const {
  const double pairs = static_cast<double>(to_mask(pattern, prompt_len, 0).document_pairs(prompt_len));
  return pairs * 4.0 * head_dim / attention_flops_per_s;
}

double AnalyticHeadCost::qo(Tokens prompt_len) const {
  return 2.0 * (2.0 * static_cast<double>(prompt_len) * hidden * head_dim) / gemm_flops_per_s;
}

LayerCosts HeadCostModel::layer(const LayerPatterns& patterns, int kv_heads, Tokens prompt_len) const {
  const int q_heads = static_cast<int>(patterns.size());
  if (kv_heads < 1 || q_heads % kv_heads != 0) {
    fail("kv_heads = {}: must be >= 1 and divide the layer's q heads = {}", kv_heads, q_heads);
  }
  if (prompt_len < 1) fail("prompt tokens = {}: must be >= 1", prompt_len);
  LayerCosts c;
  c.group_size = q_heads / kv_heads;
  c.offload_per_group_s = offload_per_group_s;
  c.qkvo_s = profile ? profile->qkvo(prompt_len) : analytic.qkvo(prompt_len);
  c.qo_s = profile ? profile->qo(prompt_len) : analytic.qo(prompt_len);
  std::map<std::string, double> cache;
  for (const HeadPattern& p : patterns) {
    const std::string key = p.key();
    auto it = cache.find(key);
    if (it == cache.end()) {
      it = cache.emplace(key, profile ? profile->attention(p, prompt_len) : analytic.attention(p, prompt_len)).first;
    }
    c.attention_s.push_back(it->second);
  }
  c.validate();
  return c;
}

}  // namespace fulcrum::heads
