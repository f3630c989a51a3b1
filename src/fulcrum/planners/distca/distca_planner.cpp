#include "fulcrum/planners/distca/distca_planner.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/planners/distca/rehome.hpp"
#include "fulcrum/planners/distca/scheduler.hpp"

namespace fulcrum {

namespace {

const OptionSpec kTolerance{"tolerance", "DistCA: stop when every server is within this x the mean load", 0.1, 0, 10};
const OptionSpec kOvershoot{"overshoot",
                            "DistCA: a move may fill its destination past the mean by this fraction of tolerance x "
                            "mean (0: to the mean, the paper's rule; fewer, larger shards of long documents move "
                            "less K/V)",
                            0.9, 0, 0.99};
const OptionSpec kGranularity{
    "granularity", "DistCA: shard sizes are multiples of this many tokens (the kernel tile)", 128, 1, 1 << 24, true,
    true};
const OptionSpec kPartialKv{"partial-kv",
                            "DistCA: 1 lets a move cut a heavy row range along its keys (a partial-K/V task, merged "
                            "by LSE at the rows' owner) when that moves fewer bytes per FLOP; 0: rows only",
                            0,
                            0,
                            1,
                            true};

const OptionSpec kBusiestFirst{"busiest-first",
                               "DistCA: a move takes the most loaded server's best shard when its FLOPs per byte is "
                               "at least this fraction of the best shard's (1: the best shard of any server, the "
                               "paper's rule; lower: long documents leave their owners in fewer, larger shards)",
                               0.5, 0, 1};

const OptionSpec kRehome{"rehome",
                         "DistCA: 1 re-homes items off the rank that moves the most bytes after balancing, to "
                         "servers that already hold part of their document, while that lowers the busiest rank's "
                         "bytes within the tolerance and --rehome-bytes; 0: off",
                         1,
                         0,
                         1,
                         true};
const OptionSpec kRehomeBytes{"rehome-bytes",
                              "DistCA: the re-homing pass may leave total bytes up to this fraction above the "
                              "plan's before it (0: never above)",
                              0.01, 0, 1};

}  // namespace

DistcaPlanner::DistcaPlanner(const PlannerOptions& options)
    : model_(options.model),
      tolerance_(options.get(kTolerance)),
      granularity_(options.get_tokens(kGranularity)),
      overshoot_(options.get(kOvershoot)),
      partial_kv_(options.get_int(kPartialKv) == 1),
      busiest_first_(options.get(kBusiestFirst)),
      rehome_(options.get_int(kRehome) == 1),
      rehome_bytes_(options.get(kRehomeBytes)) {}

Assignment DistcaPlanner::do_plan(const Batch& batch) {
  auto result = distca::schedule(batch, model_, {tolerance_, granularity_, overshoot_, partial_kv_, busiest_first_});
  if (rehome_) {
    distca::rehome_busiest_ranks(batch, model_, result.items, result.server_flops, {tolerance_, rehome_bytes_});
  }
  return distca::items_to_assignment(batch, result.items);
}

PlannerRegistration distca_registration() {
  return {.name = "distca",
          .summary = "core-attention disaggregation: CA-task shards moved to balance attention FLOPs",
          .capabilities = {.moves_attention = true,
                           .splits_documents = true,
                           .keeps_documents = true,
                           .keeps_placement = true,
                           .masks = all_mask_kinds(),  // band masks exactly; index-list masks over their hull
                           .overlaps_traffic = true,
                           .pools_pipeline_stages = true},
          .options = {kTolerance, kGranularity, kOvershoot, kPartialKv, kBusiestFirst, kRehome, kRehomeBytes},
          .make = [](const PlannerOptions& o) { return std::make_unique<DistcaPlanner>(o); }};
}

}  // namespace fulcrum
