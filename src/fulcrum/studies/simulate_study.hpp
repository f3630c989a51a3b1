// A study: the training simulator run over a grid of configurations and planners, what `fulcrum
// simulate` prints. Each sweep axis names a TrainingConfig field (or the model or hardware) and its
// values; the grid is their product, and at every point each planner runs on the same seeded data.
// With `search`, each planner instead gets the best layout it can find at that point (the search
// WLB-LLM's paper does for its CP/DP degrees): cp (perdoc-cp, wlb) over the powers of two that divide
// dp and, unless pp is pinned, pp over the powers of two up to 8 that divide the layers, keeping the
// GPUs, TP and the global batch (tokens per iteration) fixed, and skipping layouts whose micro-batches
// (dp x tokens-per-rank) would cut documents the given layout keeps whole; only layouts that fit in
// memory are chosen (where none fits, the one needing the least memory is reported, out of memory).
#pragma once

#include "fulcrum/sim/training.hpp"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace fulcrum::studies {

struct SweepAxis {
  std::string key;  // gpus, tp, pp, cp, microbatches, max-doc-len, tokens-per-rank,
                    // dataset, model, hardware, seed, mode, iterations, warmup, recompute, zero1, or a planner option
  std::vector<std::string> values;
};
/// Planners whose planner declares that it overlaps its own traffic with compute (DistCA's ping-pong,
/// DCP's divisions), and auto: they run in every requested mode, the others in the baseline mode.
using sim::overlaps_traffic;

/// "key=v1,v2,..." (the CLI's --sweep); errors name the key and list the allowed ones.
SweepAxis parse_sweep_axis(const std::string& text);

/// The most runs (sweep points x planners and modes) one study does.
inline constexpr std::size_t kMaxStudyRuns = 1000;

struct StudySpec {
  // base.parallel.cp = 0 picks per planner, by its planner's CpGroups: a node of up to 8 TP groups
  // (per-document CP), or the smallest CP degree whose groups hold the longest document whole (WLB-LLM
  // would otherwise cut documents).
  sim::TrainingConfig base;
  std::string model = "llama3-8b";
  std::string hardware = "h200-dgx";
  std::vector<std::string> planners;  // registered planners
  std::string reference;              // speedups are relative to it when it runs, else to the first planner
  std::vector<CommMode> modes = {CommMode::kPingPong};  // DistCA's and DCP's (overlaps_traffic)
  /// The baselines': single-stream, as they run (per-document CP all-gathers K/V, then computes);
  /// DistCA's ping-pong nano-batches and DCP's divisions are those planners' own contributions.
  CommMode baseline_mode = CommMode::kSingleStream;
  bool search = false;
  bool search_pp = true;  // with search: also vary pp (else only cp)
  std::vector<SweepAxis> sweep;
};

struct StudyRow {
  std::vector<std::pair<std::string, std::string>> point;  // the sweep values of this row
  sim::TrainingResult result;
  /// This row's tokens/s over the reference planner's, at the same point (WLB-LLM computes fewer tokens in
  /// an iteration when it defers documents, so not time). None where this row or the point's reference
  /// does not fit in memory: a configuration that cannot run has no throughput to compare.
  std::optional<double> speedup;
  /// Why `speedup` is none, as tables print it: "OOM" (this row does not fit) or "ref OOM" (the point's
  /// reference does not); empty when it has one.
  [[nodiscard]] std::string no_speedup_reason() const;
};

struct Study {
  StudySpec spec;
  std::string reference;  // the planner speedups are relative to: spec.reference if it ran, else the first
  std::vector<StudyRow> rows;
};

/// Runs every point x planner x mode; `progress(done, total)` after each run.
Study run_study(const StudySpec& spec, const std::function<void(int, int)>& progress = {});

/// The configuration `search` picks for `config.planner` (exposed for tests): cp over the powers of two
/// dividing dp (only those whose groups keep documents whole), and pp too when `search_pp`; the fastest
/// layout that fits in memory, or where none fits, the one that needs the least.
sim::TrainingResult search_best(const sim::TrainingConfig& config, const ModelShape& model, const HardwareModel& gpu,
                                bool search_pp = true);

}  // namespace fulcrum::studies
