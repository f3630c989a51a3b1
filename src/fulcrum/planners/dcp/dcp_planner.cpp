#include "fulcrum/planners/dcp/dcp_planner.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/planners/dcp/blocks.hpp"
#include "fulcrum/planners/dcp/divisions.hpp"
#include "fulcrum/planners/dcp/partitioner.hpp"

#include <fmt/format.h>

#include <string>

namespace fulcrum {

namespace {

const OptionSpec kBlock{.name = "dcp-block",
                        .help = "DCP: tokens per data block",
                        .kind = OptionKind::kInteger,
                        .default_value = 1024,
                        .min = 1,
                        .max = 1 << 24};
const OptionSpec kEpsilonMachines{.name = "dcp-epsilon-machines",
                                  .help = "DCP: balance slack of the partition across machines",
                                  .default_value = 0.4,
                                  .min = 0,
                                  .max = 10};
const OptionSpec kEpsilonDevices{.name = "dcp-epsilon-devices",
                                 .help = "DCP: balance slack across the devices of a machine",
                                 .default_value = 0.1,
                                 .min = 0,
                                 .max = 10};
const OptionSpec kDivisions{.name = "dcp-divisions",
                            .help = "DCP: ordered divisions whose traffic overlaps compute",
                            .kind = OptionKind::kInteger,
                            .default_value = 4,
                            .min = 1,
                            .max = 64};
// The range's top is a bound on any model's heads; the model's own kv heads are checked by the planner
// (check_head_blocks), since the options do not know the model when a flag is parsed.
const OptionSpec kHeadBlocks{
    .name = "dcp-head-blocks",
    .help = "DCP: head blocks per computation block (must divide the model's kv heads; 1: all heads)",
    .kind = OptionKind::kInteger,
    .default_value = 1,
    .min = 1,
    .max = 1024};

}  // namespace

DcpPlanner::DcpPlanner(const PlannerOptions& options) : options_(options) {
  dcp::check_head_blocks(options_.get_int(kHeadBlocks), options_.model);
}

void DcpPlanner::check_batch_size(const Batch& batch) const {
  const Tokens block = options_.get_tokens(kBlock);
  const int head_blocks = options_.get_int(kHeadBlocks);
  const dcp::BlockCounts bounds{kDcpMaxComputeBlocks, kDcpMaxDocumentBlocks, true};
  // Counting stops past a bound, so a batch far beyond them (a 2^30-token document at one token per
  // block) is refused as quickly as one just beyond.
  const auto counts = dcp::count_blocks(batch, block, head_blocks, bounds);
  if (counts.complete) return;
  // The least power-of-two multiple of the block that fits, if the option allows one.
  std::string advice = "plan fewer tokens per batch (ranks x tokens-per-rank) or shorter documents";
  for (Tokens larger = 2 * block; larger <= static_cast<Tokens>(kBlock.max); larger *= 2) {
    if (dcp::count_blocks(batch, larger, head_blocks, bounds).complete) {
      advice = fmt::format("use dcp-block >= {}, or {}", larger, advice);
      break;
    }
  }
  const std::string beyond = counts.longest_document > kDcpMaxDocumentBlocks
                                 ? fmt::format("a document of {} blocks", counts.longest_document)
                                 : fmt::format("more than {:.0f} computation blocks", kDcpMaxComputeBlocks);
  fail(
      "dcp-block = {}: this batch has {}; DCP plans at most {:.0f} computation blocks and {} blocks per document "
      "(a computation block: a tile of {} x {} tokens with a visible pair, x dcp-head-blocks = {}; beyond them its "
      "partitioning takes minutes): {}",
      block, beyond, kDcpMaxComputeBlocks, kDcpMaxDocumentBlocks, block, block, head_blocks, advice);
}

Assignment DcpPlanner::do_plan(const Batch& batch) {
  dcp::check_block_count(batch, options_.get_tokens(kBlock), options_.get_int(kHeadBlocks));
  const auto blocks =
      dcp::make_blocks(batch, options_.get_tokens(kBlock), options_.model, options_.get_int(kHeadBlocks));
  const auto graph = dcp::placement_hypergraph(blocks, options_.model);
  // Two levels only when the ranks fill whole machines; otherwise one level across all ranks.
  const int per_machine = options_.devices_per_machine;
  const bool two_levels = batch.ranks > per_machine && batch.ranks % per_machine == 0;
  const dcp::HierarchyConfig hierarchy{.machines = two_levels ? batch.ranks / per_machine : 1,
                                       .devices_per_machine = two_levels ? per_machine : batch.ranks,
                                       .epsilon_machines = options_.get(kEpsilonMachines),
                                       .epsilon_devices = options_.get(kEpsilonDevices),
                                       .allow_heaviest_vertex = true,
                                       .seed = options_.seed};
  const auto device = dcp::partition_hierarchical(graph, hierarchy);
  const int compute = static_cast<int>(blocks.compute.size());
  const auto division = dcp::assign_divisions(blocks, device, options_.get_int(kDivisions), options_.model);

  Assignment a{.planner = {}, .batch = {}, .tasks = {}, .transfers = {}};
  // The verifier needs the model's heads only for head ranges; one head block plans as it always did.
  if (blocks.head_blocks > 1) a.q_heads = options_.model.q_heads;
  a.batch.ranks = batch.ranks;
  a.batch.tokens_per_rank = batch.tokens_per_rank;
  a.batch.documents = batch.documents;
  for (int b = 0; b < static_cast<int>(blocks.data.size()); ++b) {
    const auto& block = blocks.data[b];
    const int rank = device[compute + b];
    auto& segments = a.batch.segments;
    // Neighbouring blocks of one document on one device are one segment.
    if (!segments.empty() && segments.back().doc == block.doc && segments.back().rank == rank) {
      segments.back().tokens.end = block.tokens.end;
    } else {
      segments.push_back({block.doc, block.tokens, rank});
    }
  }
  for (int c = 0; c < compute; ++c) {
    const auto& block = blocks.compute[c];
    const auto& q = blocks.data[block.q_block];
    const Range keys = blocks.data[block.kv_block].tokens;
    const HeadRange heads = blocks.heads(block);
    // A tile that continues the previous task's keys on the same device, division and heads widens it
    // (fewer kernel items).
    if (!a.tasks.empty()) {
      auto& last = a.tasks.back();
      if (last.doc == q.doc && last.queries[0] == q.tokens && last.server == device[c] && last.keys.end == keys.begin &&
          last.division == division[c] && last.heads == heads) {
        last.keys.end = keys.end;
        continue;
      }
    }
    a.tasks.push_back({q.doc, {q.tokens, Range{}}, keys, device[c], division[c], heads});
  }
  // GQA: a head block's K/V bytes are those of the kv heads its q heads read (exact: blocks hold whole groups).
  a.transfers = minimal_transfers(a.batch, a.tasks, options_.model.q_heads / options_.model.kv_heads);
  return a;
}

PlannerRegistration dcp_registration() {
  return {.name = "dcp",
          .summary = "blockwise dynamic CP: blocks placed by hierarchical hypergraph partitioning, ordered divisions",
          .capabilities = {.moves_attention = true,
                           .splits_documents = true,
                           .splits_heads = true,  // with dcp-head-blocks > 1
                           .keeps_documents = true,
                           .keeps_placement = false,
                           .masks = all_mask_kinds(),  // band masks exactly; index-list masks over their hull
                           .overlaps_traffic = true},
          .options = {kBlock, kEpsilonMachines, kEpsilonDevices, kDivisions, kHeadBlocks},
          .make = [](const PlannerOptions& o) { return std::make_unique<DcpPlanner>(o); }};
}

}  // namespace fulcrum
