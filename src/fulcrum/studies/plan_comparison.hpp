// What `fulcrum plan` does, as a library call: draw seeded batches, plan each with every requested
// planner, verify, and summarise balance, traffic and planning time side by side.
#pragma once

#include "fulcrum/planners/planner.hpp"
#include "fulcrum/sim/auto_choice.hpp"
#include "fulcrum/workload/batch.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fulcrum::studies {

struct PlanConfig {
  std::string dataset = "pretrain";
  std::string model = "llama3-8b";
  std::string mask = "causal";
  int ranks = 16;
  Tokens tokens_per_rank = 65536;
  int batches = 1;
  std::uint64_t seed = 0;
  BoundarySplit boundary_split = BoundarySplit::kContiguous;  // how documents crossing ranks are laid out
  std::vector<std::string> planners = {"distca", "packed", "perdoc-cp", "wlb"};  // or meta-planners (auto)
  // auto's: its candidates (empty: the defaults) and the hardware model (a preset or JSON file) it simulates
  // their plans on, a rank one GPU of it.
  std::vector<std::string> candidates;
  std::string hardware = "h200-dgx";
  PlannerOptions options;  // model is filled from `model`

  void validate() const;
  /// What the planners get: `options` with the model of `model`.
  PlannerOptions planner_options() const;
};

struct PlannerSummary {
  std::string name;
  double imbalance = 0;                        // mean over batches of max/mean rank FLOPs
  double memory_imbalance = 0;                 // mean over batches of max/mean tokens owned (activations)
  double comm_bytes_total = 0;                 // mean over batches
  double comm_bytes_max_rank = 0;              // mean over batches
  double remote_tokens_max_rank = 0;           // mean over batches of the largest per-layer receive buffer
  double traffic_imbalance = 0;                // mean over batches of max/mean bytes sent + received per rank
  double tasks = 0;                            // mean over batches
  double plan_ms = 0;                          // median over batches (auto: planning every candidate)
  bool valid = true;                           // every batch passed plan::verify
  std::string first_problem;                   // the verifier's first complaint, if any
  std::optional<sim::AutoChoice> auto_choice;  // a meta-planner's: what it chose per batch
};

struct PlanComparison {
  PlanConfig config;
  double packed_imbalance = 0;  // of the input batches as packed, for reference
  std::vector<PlannerSummary> planners;
};

PlanComparison compare_planners(const PlanConfig& config);

}  // namespace fulcrum::studies
