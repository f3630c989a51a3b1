#include "fulcrum/prefill/head_assignment.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/core/json_reader.hpp"

#include <algorithm>

namespace fulcrum::prefill {

HeadAssignment contiguous_assignment(const ModelShape& shape, int ranks) {
  if (ranks < 1 || ranks > shape.q_heads) {
    fail("ranks = {}: must be in [1, {}] (the model's q heads; more ranks than heads leave ranks idle)", ranks,
         shape.q_heads);
  }
  std::vector<int> layer(static_cast<std::size_t>(shape.q_heads));
  for (int r = 0; r < ranks; ++r) {
    for (int h = r * shape.q_heads / ranks; h < (r + 1) * shape.q_heads / ranks; ++h) {
      layer[static_cast<std::size_t>(h)] = r;
    }
  }
  return HeadAssignment(static_cast<std::size_t>(shape.layers), layer);
}

void validate_assignment(const HeadAssignment& assignment, const ModelShape& shape, int ranks, std::string_view field) {
  if (assignment.size() != static_cast<std::size_t>(shape.layers)) {
    fail("{}: {} layers: the model has {}", field, assignment.size(), shape.layers);
  }
  for (std::size_t l = 0; l < assignment.size(); ++l) {
    if (assignment[l].size() != static_cast<std::size_t>(shape.q_heads)) {
      fail("{}[{}]: {} heads: the model has {} q heads", field, l, assignment[l].size(), shape.q_heads);
    }
    for (std::size_t h = 0; h < assignment[l].size(); ++h) {
      if (assignment[l][h] < 0 || assignment[l][h] >= ranks) {
        fail("{}[{}][{}] = {}: must be in [0, {}]", field, l, h, assignment[l][h], ranks - 1);
      }
    }
  }
}

HeadAssignment read_assignment_file(const std::string& path, const ModelShape& shape, int ranks) {
  const JsonDocument document = JsonDocument::read_file(path, "assignment");
  const auto layers =
      document.root().elements(static_cast<std::size_t>(shape.layers), static_cast<std::size_t>(shape.layers),
                               fmt::format("an array of {} layers", shape.layers));
  HeadAssignment out;
  for (const auto& layer : layers) {
    const auto heads = layer.elements(static_cast<std::size_t>(shape.q_heads), static_cast<std::size_t>(shape.q_heads),
                                      fmt::format("an array of {} ranks (one per q head)", shape.q_heads));
    auto& row = out.emplace_back();
    for (const auto& h : heads) row.push_back(h.integer<int>(0, ranks - 1));
  }
  return out;
}

int RankHeads::slot(std::size_t i) const {
  const auto j = static_cast<std::size_t>(
      std::upper_bound(group_begin.begin(), group_begin.end(), static_cast<int>(i)) - group_begin.begin() - 1);
  return static_cast<int>(j) * slots_per_group + (static_cast<int>(i) - group_begin[j]);
}

RankHeads rank_heads(const std::vector<int>& layer_assignment, const ModelShape& shape, int rank) {
  FULCRUM_CHECK(layer_assignment.size() == static_cast<std::size_t>(shape.q_heads), "assignment of {} heads",
                layer_assignment.size());
  const int group_size = shape.q_heads / shape.kv_heads;
  RankHeads out;
  // Heads in ascending order are already grouped by KV group (group = head / group_size).
  for (int h = 0; h < shape.q_heads; ++h) {
    if (layer_assignment[static_cast<std::size_t>(h)] != rank) continue;
    const int g = h / group_size;
    if (out.groups.empty() || out.groups.back() != g) {
      out.groups.push_back(g);
      out.group_begin.push_back(static_cast<int>(out.heads.size()));
    }
    out.heads.push_back(h);
  }
  out.group_begin.push_back(static_cast<int>(out.heads.size()));
  for (std::size_t j = 0; j < out.groups.size(); ++j) out.slots_per_group = std::max(out.slots_per_group, out.count(j));
  return out;
}

}  // namespace fulcrum::prefill
