// DCP's blocks: every document cut into data blocks of B tokens (their Q, K/V, O and LSE stay
// together on one device), and one computation block per (q-block, kv-block) pair whose mask tile is
// not empty, weighted by its exact FLOPs (partial tiles counted pair by pair through the mask).
//
// Head blocks are all heads: a CATask, and so an Attention call, covers every head of its rows, so a
// head-split would need a head range in the Plan IR (docs/architecture.md, Refinements).
#pragma once

#include "fulcrum/planners/dcp/hypergraph.hpp"
#include "fulcrum/workload/batch.hpp"
#include "fulcrum/workload/model_shape.hpp"

#include <vector>

namespace fulcrum::dcp {

struct DataBlock {
  int doc = 0;
  Range tokens;
};

struct ComputeBlock {
  int q_block = 0;   // index into Blocks::data
  int kv_block = 0;  // index into Blocks::data, same document
  double flops = 0;  // forward, exact under the mask
};

struct Blocks {
  std::vector<DataBlock> data;        // in (doc, tokens) order
  std::vector<ComputeBlock> compute;  // in (q_block, kv_block) order
};

/// Blocks of `block_tokens` tokens (a document's last block may be shorter). A tile counts as not
/// empty when some row sees some key of it as the planners ask (index-list masks: by their causal
/// hull, so the tasks tile the hull as plan::verify requires); its FLOPs are exact.
Blocks make_blocks(const Batch& batch, Tokens block_tokens, const ModelShape& model);

/// The placement hypergraph. Vertices: computation blocks [0, C) weighted by (FLOPs, 0), then data
/// blocks [C, C + D) weighted by (0, bytes held: Q, K/V, O and LSE). Nets, two per data block: its
/// Q/O net joins it with the computation blocks of its rows (Q goes there, O and LSE come back,
/// weight tokens · (q + o + lse) bytes) and its K/V net with those reading its keys (weight tokens ·
/// kv bytes). A device runs each unbroken run of a row's tiles as one task, fetching Q and returning O
/// per run, so a 2-pin net of weight tokens · (q + o + lse) bytes joins each pair of neighbouring tiles
/// of a row: every break between runs costs its Q + O again. Σ w(e)(λ − 1) then follows the bytes a
/// placement moves (up to the first run's Q + O on each device, counted twice).
Hypergraph placement_hypergraph(const Blocks& blocks, const ModelShape& model);

}  // namespace fulcrum::dcp
