// The planner contract and registry. Every strategy turns a Batch into an Assignment under the same cost
// model. `Planner::plan` is the one entry point: it validates the batch, runs the strategy's `do_plan`,
// and checks the result against the contract every planner keeps (tasks inside their documents, servers
// in range) and the capabilities it declared. The registry is a table: a strategy is one folder plus one
// registration (name, capabilities, options, factory) in registry.cpp. What the simulator and the
// runtime do differently per strategy they read from the capabilities, never from a planner's name.
#pragma once

#include "fulcrum/plan/assignment.hpp"
#include "fulcrum/planners/options.hpp"
#include "fulcrum/workload/model_shape.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace fulcrum {

/// How a planner uses context-parallel groups of ranks (the shared `cp-degree` option).
enum class CpGroups : std::uint8_t {
  kNone,            // plans over all ranks at once
  kWithinGroup,     // spreads each document over its group (per-document CP: a node's worth by default)
  kHoldsDocuments,  // packs whole documents per group, so a group must hold the longest document (WLB-LLM)
};

struct PlannerCapabilities {
  bool moves_attention = false;        // CA-tasks may run on a rank that does not own their rows
  bool splits_documents = false;       // one document's rows may be computed on several ranks
  bool splits_heads = false;           // CA-tasks may cover some of the q heads (CATask::heads)
  bool keeps_documents = true;         // computes exactly the input batch's documents (else defers or re-lays out some)
  bool defers_documents = false;       // holds documents back for later batches (held_documents())
  bool keeps_placement = true;         // leaves tokens where the packing put them
  std::vector<MaskKind> masks;         // masks it plans for
  bool overlaps_traffic = false;       // orders its own work to overlap traffic (worth running in every mode)
  bool pools_pipeline_stages = false;  // with pipeline stages, every stage's CA-tasks share all ranks
  CpGroups cp_groups = CpGroups::kNone;
};

class Planner;

struct PlannerRegistration {
  std::string_view name;
  std::string_view summary;  // one line, for --help and docs
  PlannerCapabilities capabilities;
  std::vector<OptionSpec> options;  // the options it reads
  std::function<std::unique_ptr<Planner>(const PlannerOptions&)> make;
};

class Planner {
 public:
  virtual ~Planner() = default;
  std::string_view name() const;
  const PlannerCapabilities& capabilities() const;
  /// Plans one batch and checks the contract (see the top of this file). Bad batches throw a bad-input
  /// Error; a result that breaks the contract throws an internal one naming the planner. Stateful
  /// planners (wlb) carry deferred documents into the next call.
  Assignment plan(const Batch& batch);
  /// What `plan` checks before any work: the batch (bad input), the options that depend on it, and that
  /// the batch is within the size the planner supports (check_batch_size). Callers that run several
  /// planners check every one first, so that a refusal comes before any planning.
  void check_batch(const Batch& batch) const;
  /// Documents held back for a later call (wlb's queues); planners that defer nothing keep 0.
  virtual std::size_t deferred_documents() const { return 0; }
  /// The end of a run: from now on release what is held back as soon as it fits.
  virtual void drain() {}
  /// What a deferring planner holds between calls, its queues in its own order (empty for the others).
  /// auto (simulate) saves it before trying the planner on an iteration and restores it when another
  /// candidate takes the iteration, so that no document is deferred by a try that did not count.
  virtual std::vector<std::vector<Document>> held_documents() const { return {}; }
  /// Puts back what held_documents() returned (the same planner's).
  virtual void restore_held_documents(const std::vector<std::vector<Document>>& /*held*/) {}
  /// The longest document kept whole when each rank holds `tokens_per_rank` tokens and groups have `cp`
  /// ranks (packing planners cut longer ones into pieces, losing the attention between them).
  virtual Tokens longest_whole_document(Tokens tokens_per_rank, int cp) const;
  /// Document lengths this planner accepts on `ranks` ranks are multiples of this (striped layouts:
  /// ranks x stripe; 1 for every other planner). Other lengths are bad input naming the option.
  virtual Tokens document_length_multiple(int /*ranks*/) const { return 1; }

 protected:
  virtual Assignment do_plan(const Batch& batch) = 0;
  /// Refuses (bad input naming the option to change and the largest size supported) a batch the planner
  /// would take too long or too much memory to plan; most planners plan any batch.
  virtual void check_batch_size(const Batch& /*batch*/) const {}

 private:
  friend std::unique_ptr<Planner> make_planner(std::string_view name, const PlannerOptions& options);
  const PlannerRegistration* registration_ = nullptr;
  PlannerOptions options_;  // what it was made with, for the checks that depend on the batch
};

/// Every registered planner, in the order the CLI lists them.
const std::vector<PlannerRegistration>& planner_registry();
/// The registration called `name`; fails naming the known ones.
const PlannerRegistration& find_planner(std::string_view name);
std::unique_ptr<Planner> make_planner(std::string_view name, const PlannerOptions& options);
std::vector<std::string> planner_names();
/// A meta-planner plans no batch itself: it asks candidate planners and keeps the plan the simulator finds
/// fastest (`auto`; the mechanism is sim/auto_choice.hpp, because the simulator sits above planners/). It is
/// registered here so that it is named, listed and told apart like a planner, by what it is rather than by
/// its name. A result it produced carries its choice report (what it chose, over which candidates, and what
/// choosing cost), which the reports print where the result has one.
struct MetaPlannerRegistration {
  std::string_view name;
  std::string_view summary;          // one line, for --help and docs
  std::string_view candidates_help;  // what --candidates means for it
};
/// Every registered meta-planner (auto).
const std::vector<MetaPlannerRegistration>& meta_planner_registry();
/// Whether `name` is a registered meta-planner.
bool is_meta_planner(std::string_view name);
/// Whether any of `names` is one.
bool names_meta_planner(const std::vector<std::string>& names);
/// What a user may name where planners are chosen (--planners): planner_names(), then the meta-planners.
std::vector<std::string> selectable_planner_names();
/// Fails (bad input naming the choices) unless `name` is a planner or a meta-planner.
void check_selectable_planner(std::string_view name);

/// Every registered planner's options, each once (an option several planners read, e.g. cp-degree, is
/// declared once and registered by each), in registry order.
std::vector<OptionSpec> planner_option_specs();
/// The option called `name`; fails naming the known ones.
const OptionSpec& find_planner_option(std::string_view name);

/// Plans `batch` and checks the result with the exact-coverage verifier (plan::verify, against the input
/// batch when the planner keeps its documents): the one "plan, then verify" of the CLI, the simulator and
/// the runtime. A plan that fails it throws an internal Error naming the planner and the first problem.
Assignment plan_verified(Planner& planner, const Batch& batch);
/// plan_verified's check of `planner`'s plan `a` of `batch`, for a caller that times the planning alone.
void check_verified(const Planner& planner, const Assignment& a, const Batch& batch);

/// The smallest key range that holds every key the rows `queries` of `doc` can see under its planning mask (every
/// head's keys, when it has per-head masks).
Range visible_key_hull(const Document& doc, std::span<const Range> queries);

}  // namespace fulcrum
