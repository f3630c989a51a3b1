#include "fulcrum/planners/mtraining/striped_ring.hpp"

#include "fulcrum/core/error.hpp"

namespace fulcrum {
namespace {

const OptionSpec kBlock{.name = "mtraining-block",
                        .help = "mtraining: tokens per stripe G (must divide each rank's tokens of every document)",
                        .kind = OptionKind::kInteger,
                        .default_value = 64,
                        .min = 1,
                        .max = 1 << 20};
const OptionSpec kHierarchical{
    .name = "mtraining-hierarchical",
    .help = "mtraining: 1: inner ring per machine, outer ring across machines; 0: one flat ring",
    .kind = OptionKind::kFlag,
    .default_value = 1};

}  // namespace

Assignment StripedRingPlanner::do_plan(const Batch& batch) {
  const int ranks = batch.ranks;
  int node_ranks = ranks;
  if (node_ranks_ > 0 && node_ranks_ < ranks) {
    if (ranks % node_ranks_ != 0) {
      fail("{} ranks do not fill machines of {} (devices-per-machine): a hierarchical ring needs whole machines", ranks,
           node_ranks_);
    }
    node_ranks = node_ranks_;
  }
  Assignment a{.planner = {}, .batch = batch, .tasks = {}, .transfers = {}, .ring_node_ranks = node_ranks};
  a.batch.segments.clear();
  for (int d = 0; d < static_cast<int>(batch.documents.size()); ++d) {
    Document& doc = a.batch.documents[d];
    if (doc.length % (ranks * block_) != 0) {
      fail(
          "document {} has {} tokens: striping it over {} ranks in blocks of {} ({}) needs a multiple of {}, so "
          "that each rank's tokens are whole blocks",
          d, doc.length, ranks, block_, block_option_, ranks * block_);
    }
    doc.mask = MaskSpec::striped(doc.mask, ranks, block_);
    for (auto& m : doc.head_masks) m = MaskSpec::striped(m, ranks, block_);
    const Tokens n = doc.length / ranks;
    for (int r = 0; r < ranks; ++r) a.batch.segments.push_back({d, {r * n, (r + 1) * n}, r});
    for (int r = 0; r < ranks; ++r) {
      for (int s = 0; s < ranks; ++s) {
        a.tasks.push_back({d, {Range{r * n, (r + 1) * n}, Range{}}, {s * n, (s + 1) * n}, r});
        if (s != r) a.transfers.push_back({TensorKind::kKV, d, {s * n, (s + 1) * n}, s, r});
      }
    }
  }
  return a;
}

namespace {

PlannerCapabilities striped_capabilities() {
  return {.moves_attention = false,
          .splits_documents = true,
          // The documents are the input's stored permuted (masks wrapped in `striped`), so the verifier
          // checks the Assignment against its own batch; striped_ring_test checks the wrapping.
          .keeps_documents = false,
          .keeps_placement = false,
          .masks = all_mask_kinds()};
}

}  // namespace

PlannerRegistration striped_registration() {
  return {.name = "striped",
          .summary = "token-striped ring CP: token t on rank t mod n, a flat ring of K/V",
          .capabilities = striped_capabilities(),
          .options = {},
          .make = [](const PlannerOptions&) {
            return std::make_unique<StripedRingPlanner>(1, "striped: one-token stripes", 0);
          }};
}

PlannerRegistration mtraining_registration() {
  return {.name = "mtraining",
          .summary = "MTraining: block-striped ring CP (G-token stripes), hierarchical across machines",
          .capabilities = striped_capabilities(),
          .options = {kBlock, kHierarchical},
          .make = [](const PlannerOptions& o) {
            return std::make_unique<StripedRingPlanner>(o.get_tokens(kBlock), kBlock.name,
                                                        o.get_flag(kHierarchical) ? o.devices_per_machine : 0);
          }};
}

}  // namespace fulcrum
