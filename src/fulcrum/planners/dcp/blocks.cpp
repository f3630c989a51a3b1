#include "fulcrum/planners/dcp/blocks.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/workload/head_masks.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <string>

namespace fulcrum::dcp {

HeadRange Blocks::heads(const ComputeBlock& block) const {
  if (head_blocks == 1) return HeadRange{};
  const int per_block = q_heads / head_blocks;
  return {block.head_block * per_block, (block.head_block + 1) * per_block};
}

double tile_estimate(const Batch& batch, Tokens block_tokens, int head_blocks) {
  double tiles = 0;
  for (const auto& d : batch.documents) {
    const double blocks = std::ceil(static_cast<double>(d.length) / static_cast<double>(block_tokens));
    tiles += blocks * blocks;
  }
  return tiles * head_blocks;
}

void check_block_count(const Batch& batch, Tokens block_tokens, int head_blocks) {
  const double tiles = tile_estimate(batch, block_tokens, head_blocks);
  if (tiles <= kMaxTileEstimate) return;
  // The smallest block that fits (the estimate falls as blocks grow), to say what would work.
  Tokens lo = block_tokens, hi = std::max<Tokens>(block_tokens, 1);
  while (tile_estimate(batch, hi, head_blocks) > kMaxTileEstimate && hi < (Tokens{1} << 40)) hi *= 2;
  while (hi - lo > 1) {
    const Tokens mid = lo + (hi - lo) / 2;
    (tile_estimate(batch, mid, head_blocks) > kMaxTileEstimate ? lo : hi) = mid;
  }
  fail(
      "dcp-block = {}: {} ranks x {} tokens make about {:.3g} computation blocks (documents' squares of blocks x "
      "{} head blocks), more than the {:.3g} DCP plans; use dcp-block >= {} or fewer tokens",
      block_tokens, batch.ranks, batch.tokens_per_rank, tiles, head_blocks, kMaxTileEstimate, hi);
}

void check_head_blocks(int head_blocks, const ModelShape& model) {
  if (head_blocks >= 1 && model.kv_heads % head_blocks == 0) return;
  // Whole GQA groups: a head block that split a group would read the same K/V as its neighbour, so
  // both devices would fetch it, and the kernel's key item (which sweeps a group's q heads) would split.
  std::string allowed;
  for (int h = 1; h <= model.kv_heads; ++h) {
    if (model.kv_heads % h == 0) allowed += fmt::format("{}{}", allowed.empty() ? "" : ", ", h);
  }
  fail(
      "dcp-head-blocks = {}: must divide the model's kv_heads = {} (head blocks hold whole GQA groups of {} q "
      "heads): one of {}",
      head_blocks, model.kv_heads, model.q_heads / std::max(model.kv_heads, 1), allowed);
}

TokenBytes head_block_token_bytes(const ModelShape& model, int head_blocks) {
  const TokenBytes row = token_bytes(model);
  const double share = 1.0 / head_blocks;  // exactly 1 for one head block: the bytes stay bitwise the same
  return {row.q * share, row.kv * share, row.o * share, row.lse * share};
}

namespace {

// Every head of a document, as runs under one mask each (one run when it has no per-head masks).
std::vector<MaskRun> all_head_runs(const Document& doc) { return mask_runs(doc.mask, doc.head_masks, HeadRange{}); }

}  // namespace

Blocks make_blocks(const Batch& batch, Tokens block_tokens, const ModelShape& model, int head_blocks) {
  FULCRUM_CHECK(block_tokens >= 1, "block of {} tokens (the dcp-block option checks its range)", block_tokens);
  FULCRUM_CHECK(head_blocks >= 1 && model.kv_heads % head_blocks == 0,
                "{} head blocks of {} kv heads (the planner checks dcp-head-blocks)", head_blocks, model.kv_heads);
  Blocks blocks;
  blocks.head_blocks = head_blocks;
  blocks.q_heads = model.q_heads;
  std::vector<std::pair<int, double>> row;  // one row's non-empty tiles: (kv block, FLOPs of every head)
  for (int d = 0; d < static_cast<int>(batch.documents.size()); ++d) {
    const auto& doc = batch.documents[d];
    const int first = static_cast<int>(blocks.data.size());
    for (Tokens t = 0; t < doc.length; t += block_tokens)
      blocks.data.push_back({d, {t, std::min(t + block_tokens, doc.length)}});
    const int last = static_cast<int>(blocks.data.size());
    const std::vector<MaskRun> runs = all_head_runs(doc);
    for (int q = first; q < last; ++q) {
      const std::array<Range, 1> rows{blocks.data[q].tokens};
      row.clear();
      for (int k = first; k < last; ++k) {
        const Range keys = blocks.data[k].tokens;
        // A tile exists when some head sees a key in it (per-head masks: a full head sees past the diagonal).
        if (keys_needed(runs, rows[0], keys, doc.length).empty()) continue;
        row.emplace_back(k, attention_forward_flops(model, doc.mask, rows, keys, doc.length));
      }
      for (int h = 0; h < head_blocks; ++h) {
        const ComputeBlock block{q, 0, 0, h};
        for (const auto& [k, flops] : row) {
          // One mask: every head is masked alike, so a head block's FLOPs are the tile's over H (exact for H = 1);
          // per-head masks: the block's heads, each under its own mask.
          const double block_flops =
              doc.head_masks.empty() ? flops / head_blocks
                                     : attention_forward_flops(model.head_dim, model.q_heads,
                                                               mask_runs(doc.mask, doc.head_masks, blocks.heads(block)),
                                                               rows, blocks.data[k].tokens, doc.length);
          blocks.compute.push_back({q, k, block_flops, h});
        }
      }
    }
  }
  return blocks;
}

BlockCounts count_blocks(const Batch& batch, Tokens block_tokens, int head_blocks, const BlockCounts& stop_above) {
  FULCRUM_CHECK(block_tokens >= 1, "block of {} tokens (the dcp-block option checks its range)", block_tokens);
  BlockCounts counts;
  for (const auto& doc : batch.documents)
    counts.longest_document = std::max(counts.longest_document, ceil_div(doc.length, block_tokens));
  // Past the bound on documents the tiles are not counted: at one token per block the largest document
  // alone has 2^30 block rows.
  if (counts.longest_document > stop_above.longest_document) {
    counts.complete = false;
    return counts;
  }
  for (const auto& doc : batch.documents) {
    const std::vector<MaskRun> runs = all_head_runs(doc);
    for (Tokens q = 0; q < doc.length; q += block_tokens) {
      const Range rows{q, std::min(q + block_tokens, doc.length)};
      Tokens next = 0;  // the first key block not counted yet (the needed ranges are sorted)
      for (const Range& keys : keys_needed(runs, rows, {0, doc.length}, doc.length)) {
        if (keys.empty()) continue;
        const Tokens first = std::max(next, keys.begin / block_tokens), last = (keys.end - 1) / block_tokens;
        if (last >= first) counts.compute += static_cast<double>(last - first + 1) * head_blocks;
        next = std::max(next, last + 1);
      }
      if (counts.compute > stop_above.compute) {
        counts.complete = false;
        return counts;
      }
    }
  }
  return counts;
}

Hypergraph placement_hypergraph(const Blocks& blocks, const ModelShape& model) {
  const int compute = static_cast<int>(blocks.compute.size());
  const int data = static_cast<int>(blocks.data.size());
  const int heads = blocks.head_blocks;
  const auto row_bytes = token_bytes(model);  // a data block holds every head of its rows
  const auto bytes = head_block_token_bytes(model, heads);
  std::vector<double> weights;
  weights.reserve(2 * static_cast<std::size_t>(compute + data));
  for (const auto& c : blocks.compute) weights.insert(weights.end(), {c.flops, 0.0});
  // Net 2 (b H + h) carries data block b's Q/O of head block h, net 2 (b H + h) + 1 its K/V.
  auto net = [heads](int block, int head_block, int kind) { return 2 * (block * heads + head_block) + kind; };
  std::vector<std::vector<int>> nets(2 * static_cast<std::size_t>(data) * heads);
  std::vector<double> net_weights(nets.size());
  for (int b = 0; b < data; ++b) {
    const auto tokens = static_cast<double>(blocks.data[b].tokens.size());
    weights.insert(weights.end(), {0.0, tokens * (row_bytes.q + row_bytes.kv + row_bytes.output())});
    for (int h = 0; h < heads; ++h) {
      nets[net(b, h, 0)] = {compute + b};
      nets[net(b, h, 1)] = {compute + b};
      net_weights[net(b, h, 0)] = tokens * (bytes.q + bytes.output());
      net_weights[net(b, h, 1)] = tokens * bytes.kv;
    }
  }
  for (int c = 0; c < compute; ++c) {
    const auto& block = blocks.compute[c];
    nets[net(block.q_block, block.head_block, 0)].push_back(c);
    nets[net(block.kv_block, block.head_block, 1)].push_back(c);
  }
  // Neighbouring tiles of one row and head block: a device runs each unbroken run of them as one task,
  // which fetches the row's Q and returns its O once, so every break between runs costs another Q + O.
  for (int c = 1; c < compute; ++c) {
    const auto &left = blocks.compute[c - 1], &right = blocks.compute[c];
    if (left.q_block != right.q_block || left.head_block != right.head_block || left.kv_block + 1 != right.kv_block) {
      continue;
    }
    nets.push_back({c - 1, c});
    net_weights.push_back(static_cast<double>(blocks.data[right.q_block].tokens.size()) * (bytes.q + bytes.output()));
  }
  return Hypergraph(2, std::move(weights), std::move(net_weights), nets);
}

}  // namespace fulcrum::dcp
