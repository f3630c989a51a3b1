#include "fulcrum/planners/dcp/blocks.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/cost/attention_cost.hpp"

namespace fulcrum::dcp {

Blocks make_blocks(const Batch& batch, Tokens block_tokens, const ModelShape& model) {
  FULCRUM_CHECK(block_tokens >= 1, "block of {} tokens (the dcp-block option checks its range)", block_tokens);
  Blocks blocks;
  for (int d = 0; d < static_cast<int>(batch.documents.size()); ++d) {
    const auto& doc = batch.documents[d];
    const int first = static_cast<int>(blocks.data.size());
    for (Tokens t = 0; t < doc.length; t += block_tokens)
      blocks.data.push_back({d, {t, std::min(t + block_tokens, doc.length)}});
    const int last = static_cast<int>(blocks.data.size());
    for (int q = first; q < last; ++q) {
      const std::array<Range, 1> rows{blocks.data[q].tokens};
      for (int k = first; k < last; ++k) {
        const Range keys = blocks.data[k].tokens;
        if (doc.mask.keys_needed(rows[0], keys, doc.length).empty()) continue;
        blocks.compute.push_back({q, k, attention_forward_flops(model, doc.mask, rows, keys, doc.length)});
      }
    }
  }
  return blocks;
}

Hypergraph placement_hypergraph(const Blocks& blocks, const ModelShape& model) {
  const int compute = static_cast<int>(blocks.compute.size());
  const int data = static_cast<int>(blocks.data.size());
  const auto bytes = token_bytes(model);
  std::vector<double> weights;
  weights.reserve(2 * static_cast<std::size_t>(compute + data));
  for (const auto& c : blocks.compute) weights.insert(weights.end(), {c.flops, 0.0});
  std::vector<std::vector<int>> nets(2 * static_cast<std::size_t>(data));
  std::vector<double> net_weights(nets.size());
  for (int b = 0; b < data; ++b) {
    const auto tokens = static_cast<double>(blocks.data[b].tokens.size());
    weights.insert(weights.end(), {0.0, tokens * (bytes.q + bytes.kv + bytes.output())});
    nets[2 * b] = {compute + b};
    nets[2 * b + 1] = {compute + b};
    net_weights[2 * b] = tokens * (bytes.q + bytes.output());
    net_weights[2 * b + 1] = tokens * bytes.kv;
  }
  for (int c = 0; c < compute; ++c) {
    nets[2 * blocks.compute[c].q_block].push_back(c);
    nets[2 * blocks.compute[c].kv_block + 1].push_back(c);
  }
  // Neighbouring tiles of one row: a device runs each unbroken run of a row's tiles as one task, which
  // fetches the row's Q and returns its O once, so every break between runs costs another Q + O.
  for (int c = 1; c < compute; ++c) {
    const auto &left = blocks.compute[c - 1], &right = blocks.compute[c];
    if (left.q_block != right.q_block || left.kv_block + 1 != right.kv_block) continue;
    nets.push_back({c - 1, c});
    net_weights.push_back(static_cast<double>(blocks.data[right.q_block].tokens.size()) * (bytes.q + bytes.output()));
  }
  return Hypergraph(2, std::move(weights), std::move(net_weights), nets);
}

}  // namespace fulcrum::dcp
