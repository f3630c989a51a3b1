#include "fulcrum/planners/distca/distca_planner.hpp"

#include "fulcrum/core/error.hpp"

namespace fulcrum {

namespace {

const OptionSpec kTolerance{.name = "tolerance",
                            .help = "DistCA: stop when every server is within this x the mean load",
                            .default_value = 0.1,
                            .min = 0,
                            .max = 10};
const OptionSpec kOvershoot{.name = "overshoot",
                            .help =
                                "DistCA: a move may fill its destination past the mean by this fraction of "
                                "tolerance x mean (0: to the mean, the paper's rule; fewer, larger shards of "
                                "long documents move less K/V)",
                            .default_value = 0.9,
                            .min = 0,
                            .max = 0.99};
const OptionSpec kGranularity{.name = "granularity",
                              .help = "DistCA: shard sizes are multiples of this many tokens (the kernel tile)",
                              .kind = OptionKind::kInteger,
                              .default_value = 128,
                              .min = 1,
                              .max = 1 << 24,
                              .at_most_tokens_per_rank = true};
const OptionSpec kPartialKv{.name = "partial-kv",
                            .help =
                                "DistCA: 1 lets a move cut a heavy row range along its keys (a partial-K/V "
                                "task, merged by LSE at the rows' owner) when that moves fewer bytes per FLOP; "
                                "0: rows only",
                            .kind = OptionKind::kFlag,
                            .default_value = 0};
const OptionSpec kBusiestFirst{.name = "busiest-first",
                               .help =
                                   "DistCA: a move takes the most loaded server's best shard when its FLOPs per "
                                   "byte is at least this fraction of the best shard's (1: the best shard of any "
                                   "server, the paper's rule; lower: long documents leave their owners in "
                                   "fewer, larger shards)",
                               .default_value = 0.5,
                               .min = 0,
                               .max = 1};
const OptionSpec kRehome{.name = "rehome",
                         .help =
                             "DistCA: 1 re-homes items off the rank that moves the most bytes after balancing, "
                             "to servers that already hold part of their document, while that lowers the "
                             "busiest rank's bytes within the tolerance and --rehome-bytes; 0: off",
                         .kind = OptionKind::kFlag,
                         .default_value = 1};
const OptionSpec kRehomeBytes{.name = "rehome-bytes",
                              .help =
                                  "DistCA: the re-homing pass may leave total bytes up to this fraction above "
                                  "the plan's before it (0: never above)",
                              .default_value = 0.01,
                              .min = 0,
                              .max = 1};

}  // namespace

DistcaOptions distca_options(const PlannerOptions& options) {
  const double tolerance = options.get(kTolerance);
  return {.scheduler = {.tolerance = tolerance,
                        .granularity = options.get_tokens(kGranularity),
                        .overshoot = options.get(kOvershoot),
                        .partial_kv = options.get_flag(kPartialKv),
                        .busiest_first = options.get(kBusiestFirst)},
          .rehome = options.get_flag(kRehome),
          .rehome_limits = {.tolerance = tolerance, .rehome_bytes = options.get(kRehomeBytes)}};
}

DistcaPlanner::DistcaPlanner(const PlannerOptions& options)
    : model_(options.model), options_(distca_options(options)) {}

Assignment DistcaPlanner::do_plan(const Batch& batch) {
  auto result = distca::schedule(batch, model_, options_.scheduler);
  if (options_.rehome) {
    distca::rehome_busiest_ranks(batch, model_, result.items, result.server_flops, options_.rehome_limits);
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
