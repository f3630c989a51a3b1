// The planner interface and registry: every strategy turns a Batch into an Assignment under the same
// cost model, and declares what it can do so tests can hold it to its word.
#pragma once

#include "fulcrum/plan/assignment.hpp"
#include "fulcrum/workload/model_shape.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace fulcrum {

struct PlannerOptions {
  ModelShape model;
  double tolerance = 0.1;     // DistCA: stop when every server is within tolerance x the mean load
  Tokens granularity = 128;   // DistCA: shard sizes are multiples of this (the kernel tile)
  int cp_degree = 8;          // perdoc-cp: ranks per context-parallel group (one node)
  double wlb_token_cap = 1.5; // wlb: micro-batch token cap S_max, in units of tokens-per-rank
  Tokens dcp_block = 1024;            // dcp: tokens per data block
  double dcp_epsilon_machines = 0.4;  // dcp: balance slack of the partition across machines
  double dcp_epsilon_devices = 0.1;   // dcp: balance slack across the devices of a machine
  int dcp_divisions = 4;              // dcp: ordered divisions whose traffic overlaps compute
  int devices_per_machine = 8;        // dcp: ranks per machine (two partition levels when ranks fill machines)
  std::uint64_t seed = 0;             // dcp: partitioner seed

  /// Throws fulcrum::Error naming the option when it is out of range for batches of this shape.
  void validate(Tokens tokens_per_rank) const;
};

struct PlannerCapabilities {
  bool moves_attention = false;   // CA-tasks may run on a rank that does not own their tokens
  bool splits_documents = false;  // one document's rows may be computed on several ranks
  bool keeps_documents = true;    // computes exactly the input batch's documents (else defers some)
  bool keeps_placement = true;    // leaves tokens where the packing put them
  std::vector<MaskKind> masks;    // masks it plans for
};

class Planner {
 public:
  virtual ~Planner() = default;
  virtual std::string_view name() const = 0;
  virtual PlannerCapabilities capabilities() const = 0;
  /// Plans one batch. Stateful planners (wlb) carry deferred documents into the next call.
  virtual Assignment plan(const Batch& batch) = 0;
  /// Documents held back for a later call (wlb's queues); planners that defer nothing keep 0.
  virtual std::size_t deferred_documents() const { return 0; }
  /// The end of a run: from now on release what is held back as soon as it fits.
  virtual void drain() {}
};

std::unique_ptr<Planner> make_planner(std::string_view name, const PlannerOptions& options);
std::vector<std::string> planner_names();

/// The smallest key range that holds every key the rows `queries` of `doc` can see.
Range visible_key_hull(const Document& doc, std::span<const Range> queries);

}  // namespace fulcrum
