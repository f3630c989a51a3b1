#include "fulcrum/cost/profile_table.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/core/json_reader.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace fulcrum {
namespace {

// Index i and weight w such that value ~ axis[i] * (1 - w) + axis[i + 1] * w, clamped to the axis ends.
std::pair<std::size_t, double> locate(const std::vector<Tokens>& axis, Tokens value) {
  if (axis.size() == 1 || value <= axis.front()) return {0, 0.0};
  if (value >= axis.back()) return {axis.size() - 2, 1.0};
  const auto upper = static_cast<std::size_t>(std::upper_bound(axis.begin(), axis.end(), value) - axis.begin());
  const std::size_t i = upper - 1;
  return {i, static_cast<double>(value - axis[i]) / static_cast<double>(axis[i + 1] - axis[i])};
}

// The grid's shape (ascending axes, one value per cell) is ThroughputGrid::validate's to check; its
// message is reported at the grid's path.
ThroughputGrid grid_from_json(const JsonValue& j, const std::string& name) {
  j.only_keys({"query_lengths", "key_lengths", "flops_per_s"});
  ThroughputGrid g;
  for (const auto& v : j.at("query_lengths").elements()) g.query_lengths.push_back(v.integer<Tokens>(1));
  for (const auto& v : j.at("key_lengths").elements()) g.key_lengths.push_back(v.integer<Tokens>(1));
  for (const auto& v : j.at("flops_per_s").elements()) g.flops_per_s.push_back(v.positive());
  try {
    g.validate(name);
  } catch (const Error& e) {
    j.fail_here(e.what());
  }
  return g;
}

nlohmann::json grid_to_json(const ThroughputGrid& g) {
  return {{"query_lengths", g.query_lengths}, {"key_lengths", g.key_lengths}, {"flops_per_s", g.flops_per_s}};
}

}  // namespace

double ThroughputGrid::at(Tokens q_len, Tokens k_len) const {
  const auto [qi, qw] = locate(query_lengths, q_len);
  const auto [ki, kw] = locate(key_lengths, k_len);
  const std::size_t cols = key_lengths.size();
  auto value = [&](std::size_t q, std::size_t k) {
    q = std::min(q, query_lengths.size() - 1);
    k = std::min(k, cols - 1);
    return flops_per_s[q * cols + k];
  };
  // Below the smallest measured length a shard takes as long as one of that length (a partial tile costs a
  // whole one), so its throughput falls in proportion.
  const auto below = [](const std::vector<Tokens>& axis, Tokens length) {
    return length < axis.front() ? static_cast<double>(length) / static_cast<double>(axis.front()) : 1.0;
  };
  return below(query_lengths, q_len) * below(key_lengths, k_len) *
         ((1 - qw) * ((1 - kw) * value(qi, ki) + kw * value(qi, ki + 1)) +
          qw * ((1 - kw) * value(qi + 1, ki) + kw * value(qi + 1, ki + 1)));
}

void ThroughputGrid::validate(const std::string& name) const {
  if (query_lengths.empty() || key_lengths.empty()) fail("profile {}: empty axis", name);
  if (!std::is_sorted(query_lengths.begin(), query_lengths.end()) ||
      std::adjacent_find(query_lengths.begin(), query_lengths.end()) != query_lengths.end()) {
    fail("profile {}.query_lengths: must be strictly ascending", name);
  }
  if (!std::is_sorted(key_lengths.begin(), key_lengths.end()) ||
      std::adjacent_find(key_lengths.begin(), key_lengths.end()) != key_lengths.end()) {
    fail("profile {}.key_lengths: must be strictly ascending", name);
  }
  if (flops_per_s.size() != query_lengths.size() * key_lengths.size()) {
    fail("profile {}.flops_per_s: {} values for a {} x {} grid", name, flops_per_s.size(), query_lengths.size(),
         key_lengths.size());
  }
  for (double v : flops_per_s) {
    if (!(v > 0)) fail("profile {}.flops_per_s: {} must be > 0", name, v);
  }
}

ProfileTable ProfileTable::from_peak(double flops_per_s) {
  if (!(flops_per_s > 0)) fail("profile peak = {}: must be > 0 FLOP/s", flops_per_s);
  ProfileTable table;
  table.forward_ = {{1}, {1}, {flops_per_s}};
  table.backward_ = table.forward_;
  return table;
}

ProfileTable ProfileTable::from_json(const JsonValue& json) {
  json.only_keys({"forward", "backward"});
  ProfileTable table;
  table.forward_ = grid_from_json(json.at("forward"), "forward");
  table.backward_ = grid_from_json(json.at("backward"), "backward");
  return table;
}

ProfileTable ProfileTable::from_json(const nlohmann::json& json) { return from_json(JsonValue(json, "", "profile")); }

ProfileTable ProfileTable::load(const std::string& path) {
  return from_json(JsonDocument::read_file(path, "profile").root());
}

nlohmann::json ProfileTable::to_json() const {
  return {{"forward", grid_to_json(forward_)}, {"backward", grid_to_json(backward_)}};
}

}  // namespace fulcrum
