#include "fulcrum/sim/training.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/cost/model_cost.hpp"
#include "fulcrum/planners/baselines/perdoc_cp.hpp"
#include "fulcrum/sim/microbatch_source.hpp"
#include "fulcrum/sim/pipeline.hpp"
#include "fulcrum/sparse/dynamic_mask.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>

namespace fulcrum::sim {

void TrainingConfig::validate(const HardwareModel& gpu, const ModelShape& model) const {
  ParallelConfig layout = parallel;
  if (is_meta_planner(planner) && layout.cp == 0) layout.cp = 1;  // 0: each candidate's own CP degree
  layout.validate(gpu, model);
  constexpr Tokens kMaxLength = Tokens{1} << 24;
  if (max_doc_len < 1 || max_doc_len > kMaxLength)
    fail("max-doc-len = {}: must be in [1, {}]", max_doc_len, kMaxLength);
  if (tokens_per_rank < 0 || tokens_per_rank > kMaxLength) {
    fail("tokens-per-rank = {}: must be in [0, {}] (0: max-doc-len)", tokens_per_rank, kMaxLength);
  }
  if (iterations < 1 || iterations > 1000) fail("iterations = {}: must be in [1, 1000]", iterations);
  if (warmup_iterations < 0 || warmup_iterations > 1000) {
    fail("warmup = {}: must be in [0, 1000]", warmup_iterations);
  }
  const std::int64_t runs = iterations + warmup_iterations;
  if (static_cast<std::int64_t>(parallel.microbatch_count()) * runs > kMaxMicrobatchesPerRun) {
    fail("microbatches = {}: {} micro-batches x {} iterations (warm-up included) exceed the {} a run simulates",
         parallel.microbatches, parallel.microbatch_count(), runs, kMaxMicrobatchesPerRun);
  }
  if (!sparse::parse_dynamic_mask(mask)) (void)MaskSpec::parse(mask);  // names the field and the syntax
  if (is_meta_planner(planner)) {
    check_auto_candidates(candidates, AutoScope::kRun);
    return;  // each candidate's CP degree is checked with its own configuration
  }
  if (!candidates.empty()) fail("candidates: only planner auto has candidates (planner is {})", planner);
  const bool cp_groups = find_planner(planner).capabilities.cp_groups != CpGroups::kNone;
  const double cp_degree = planner_options.get(cp_degree_option());
  if (cp_groups && planner_options.values().contains(cp_degree_option().name) && cp_degree != parallel.cp) {
    fail("cp-degree = {}: disagrees with cp = {} (the simulator's CP degree is the layout's; give one of them)",
         cp_degree, parallel.cp);
  }
  if (!cp_groups && parallel.cp != 1) {
    fail("cp = {}: planner {} does not plan in context-parallel groups (cp must be 1)", parallel.cp, planner);
  }
}

namespace {

// Per TP group ("slot": stage x dp + d), the busy seconds of one iteration by kind.
struct SlotTotals {
  std::vector<double> linear, attention, exposed;
  explicit SlotTotals(int slots) : linear(slots, 0), attention(slots, 0), exposed(slots, 0) {}
  void add(int slot, const PassTimes& t, int rank, double layers) {
    linear[slot] += layers * t.linear_s[rank];
    attention[slot] += layers * (t.attention_s[rank] + t.other_s[rank]);
    exposed[slot] += t.layers_exposed_s(rank, layers);
  }
};

struct IterationOutcome {
  double iteration_s = 0;  // without the gradient synchronisation
  double planning_s = 0;   // wall seconds in Planner::plan (not its verification)
  double work = 0;         // forward FLOPs per layer (attention + linear) of the documents computed
  double tokens = 0, bytes = 0, tokens_in_flight = 0, microbatch_tokens = 0, attention_buffers = 0;
  SlotTotals slots;
  std::vector<runtime::TimelineEvent> trace;
  StepMatrix step_flops, step_attention_s;  // the first micro-batch's layer, forward + backward (1F1B)
  explicit IterationOutcome(int n) : slots(n) {}
};

StepMatrix add_steps(StepMatrix x, const StepMatrix& y) {
  for (std::size_t r = 0; r < x.size(); ++r) {
    for (std::size_t s = 0; s < x[r].size(); ++s) x[r][s] += y[r][s];
  }
  return x;
}

struct Context {
  LayerSetup setup;
  int dp, pp, microbatches;
  double stage_layers;
  double p2p_s;  // one micro-batch's activations to the next stage
};

void note_pass(IterationOutcome& out, const PassTimes& t, double layers) {
  for (std::size_t r = 0; r < t.end_s.size(); ++r) {
    out.bytes += layers * t.bytes_sent[r];
    out.attention_buffers = std::max(out.attention_buffers, t.workspace_bytes[r]);
  }
}

double batch_work(const Batch& batch, const ModelShape& model) {
  double flops = 0;
  for (const Document& d : batch.documents) flops += document_forward_flops(model, d);
  return flops;
}

// plan_verified, its planning (not the verifier, which a training job does not run) timed into
// `out.planning_s`.
Assignment timed_plan(Planner& planner, const Batch& batch, IterationOutcome& out) {
  const auto start = std::chrono::steady_clock::now();
  Assignment a = planner.plan(batch);
  out.planning_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  check_verified(planner, a, batch);
  return a;
}

// Baselines (and DistCA without PP): every micro-batch planned over one stage's dp groups, each
// pipeline (one TP group per stage) running 1F1B on its rank's layer times.
IterationOutcome run_1f1b(const Context& cx, Planner& planner, const std::vector<Batch>& microbatches) {
  IterationOutcome out(cx.pp * cx.dp);
  std::vector<std::vector<std::vector<StageWork>>> work(cx.dp,
                                                        std::vector<std::vector<StageWork>>(cx.pp));  // [d][s][m]
  std::vector<double> max_tokens(cx.dp, 0);
  for (int m = 0; m < cx.microbatches; ++m) {
    const Assignment a = timed_plan(planner, microbatches[m], out);
    const PassTimes f = simulate_pass(a, cx.setup, Pass::kForward);
    const PassTimes b = simulate_pass(a, cx.setup, Pass::kBackward);
    if (m == 0) {
      out.step_flops = add_steps(f.step_flops, b.step_flops);
      out.step_attention_s = add_steps(f.step_attention_s, b.step_attention_s);
    }
    note_pass(out, f, cx.pp * cx.stage_layers);
    note_pass(out, b, cx.pp * cx.stage_layers);
    out.tokens += static_cast<double>(a.batch.total_tokens());
    out.work += batch_work(a.batch, cx.setup.model);
    for (int d = 0; d < cx.dp; ++d) {
      max_tokens[d] = std::max(max_tokens[d], static_cast<double>(f.tokens[d]));
      for (int s = 0; s < cx.pp; ++s) {
        work[d][s].push_back({f.layers_end_s(d, cx.stage_layers), b.layers_end_s(d, cx.stage_layers)});
        out.slots.add(s * cx.dp + d, f, d, cx.stage_layers);
        out.slots.add(s * cx.dp + d, b, d, cx.stage_layers);
      }
    }
  }
  const double in_flight = std::min(cx.pp, cx.microbatches);  // 1F1B: stage 0 holds pp micro-batches
  for (int d = 0; d < cx.dp; ++d) {
    const PipelineResult p = simulate_1f1b(work[d], cx.pp > 1 ? cx.p2p_s : 0);
    out.iteration_s = std::max(out.iteration_s, p.iteration_s);
    out.tokens_in_flight = std::max(out.tokens_in_flight, in_flight * max_tokens[d]);
    out.microbatch_tokens = std::max(out.microbatch_tokens, max_tokens[d]);
    for (const auto& step : p.steps) {
      out.trace.push_back({step.stage * cx.dp + d, runtime::Track::kCompute, 0,
                           fmt::format("{} mb{}", step.backward ? "backward" : "forward", step.microbatch),
                           step.start_s, step.end_s, 0, 0});
    }
  }
  return out;
}

// The tick's pooled batch: every working stage's micro-batch, its dp groups' tokens on that stage's
// TP groups (rank stage x dp + d); idle stages hold nothing and only serve attention.
Batch pooled_batch(const Tick& tick, const std::vector<Batch>& microbatches, int dp, std::vector<bool>& active) {
  const int stages = static_cast<int>(tick.microbatch.size());
  Batch pooled;
  pooled.ranks = stages * dp;
  pooled.tokens_per_rank = microbatches.front().tokens_per_rank;
  active.assign(static_cast<std::size_t>(pooled.ranks), false);
  for (int s = 0; s < stages; ++s) {
    const int m = tick.microbatch[s];
    if (m < 0) continue;
    const int first_doc = static_cast<int>(pooled.documents.size());
    pooled.documents.insert(pooled.documents.end(), microbatches[m].documents.begin(), microbatches[m].documents.end());
    for (const auto& seg : microbatches[m].segments)
      pooled.segments.push_back({first_doc + seg.doc, seg.tokens, s * dp + seg.rank});
    for (int d = 0; d < dp; ++d) active[s * dp + d] = true;
  }
  return pooled;
}

IterationOutcome run_phase_aligned(const Context& cx, Planner& planner, const std::vector<Batch>& microbatches) {
  IterationOutcome out(cx.pp * cx.dp);
  double max_tokens = 0;
  for (const Batch& microbatch : microbatches) {
    out.tokens += static_cast<double>(microbatch.total_tokens());
    out.work += batch_work(microbatch, cx.setup.model);  // a pooling planner keeps its documents
    std::vector<Tokens> per_rank(cx.dp, 0);
    for (const auto& s : microbatch.segments) per_rank[s.rank] += s.tokens.size();
    max_tokens = std::max(max_tokens, static_cast<double>(*std::max_element(per_rank.begin(), per_rank.end())));
  }
  std::vector<int> in_flight(cx.pp, 0);
  int most_in_flight = 0;
  double now = 0;
  for (const Tick& tick : phase_aligned_ticks(cx.pp, cx.microbatches)) {
    std::vector<bool> active;
    const Assignment a = timed_plan(planner, pooled_batch(tick, microbatches, cx.dp, active), out);
    const PassTimes t = simulate_pass(a, cx.setup, tick.backward ? Pass::kBackward : Pass::kForward, active);
    note_pass(out, t, cx.stage_layers);
    for (int r = 0; r < cx.pp * cx.dp; ++r) {
      out.slots.add(r, t, r, cx.stage_layers);
      const int m = tick.microbatch[r / cx.dp];
      const std::string name =
          m < 0 ? "attention server" : fmt::format("{} mb{}", tick.backward ? "backward" : "forward", m);
      const double busy =
          m < 0 ? cx.stage_layers * (t.attention_s[r] + t.other_s[r]) : t.layers_end_s(r, cx.stage_layers);
      out.trace.push_back({r, runtime::Track::kCompute, 0, name, now, now + busy, 0, 0});
    }
    for (int s = 0; s < cx.pp; ++s) {
      if (tick.microbatch[s] >= 0) in_flight[s] += tick.backward ? -1 : 1;
      most_in_flight = std::max(most_in_flight, in_flight[s]);
    }
    now += t.layers_makespan_s(cx.stage_layers) + cx.p2p_s;
  }
  out.iteration_s = now;
  out.tokens_in_flight = most_in_flight * max_tokens;
  out.microbatch_tokens = max_tokens;
  return out;
}

// One planner's iterations: its planner, its layer setup (its comm mode) and its schedule.
struct Runner {
  std::unique_ptr<Planner> planner;
  Context cx;
  bool phase_aligned = false;
  std::string name;        // the planner's
  PlannerOptions options;  // what `planner` was made with, for copies that look ahead
  IterationOutcome run(const std::vector<Batch>& microbatches) { return run_with(*planner, microbatches); }
  IterationOutcome run_with(Planner& p, const std::vector<Batch>& microbatches) const {
    return phase_aligned ? run_phase_aligned(cx, p, microbatches) : run_1f1b(cx, p, microbatches);
  }
};

Runner make_runner(const TrainingConfig& config, const ModelShape& model, const HardwareModel& gpu) {
  const ParallelConfig& par = config.parallel;
  const int stage_layers = model.layers / par.pp;  // exact: validate() requires pp to divide the layers
  const PlannerOptions options = training_planner_options(config, model, gpu);
  Runner r{
      make_planner(config.planner, options),
      {{model, gpu, tp_group_hardware(gpu, par.tp), par.tp, config.mode, config.whole_layer, config.memory.recompute},
       par.dp(),
       par.pp,
       par.microbatch_count(),
       static_cast<double>(stage_layers),
       0},
      false,
      config.planner,
      options};
  const double activation_bytes = static_cast<double>(config.rank_tokens()) * model.hidden * model.dtype_bytes / par.tp;
  r.cx.p2p_s = gpu.inter_node.transfer_s(activation_bytes);
  r.cx.setup.dynamic_mask = sparse::parse_dynamic_mask(config.mask);
  r.phase_aligned = r.planner->capabilities().pools_pipeline_stages && par.pp > 1;
  return r;
}

// auto's candidate `name` as a planner of its own: its mode, and its CP degree unless the layout fixes it.
TrainingConfig candidate_config(const TrainingConfig& config, const std::string& name, const ModelShape& model,
                                const HardwareModel& gpu) {
  TrainingConfig c = config;
  c.planner = name;
  c.candidates.clear();
  c.mode = overlaps_traffic(name) ? config.mode : config.baseline_mode;
  c.parallel.cp = cp_degree_for(c, model, gpu);
  c.validate(gpu, model);
  return c;
}

// The seconds `outcome` (`seconds` with the gradient sync) would take on `drawn_tokens` and `drawn_work` FLOPs
// when it computed other documents (a deferring planner holds some back and releases earlier ones): each part
// at its own rate. Its matrix seconds scale with the tokens, its attention seconds with the attention FLOPs,
// the rest (traffic, idle, sync) with all FLOPs. A try that defers the long documents computes mostly
// matrix work, which runs at a lower rate per FLOP than attention: one rate per FLOP for everything made
// wlb's tries look 9% slower than they were where its steady state beat DistCA by 2%.
double seconds_for(const IterationOutcome& outcome, double seconds, double drawn_tokens, double drawn_work,
                   const ModelShape& model) {
  if (outcome.work <= 0 || outcome.tokens <= 0) return std::numeric_limits<double>::infinity();
  const double per_token = linear_forward_flops_per_token(model);
  const double attention = outcome.work - per_token * outcome.tokens;
  const double drawn_attention = drawn_work - per_token * drawn_tokens;
  const auto slots = static_cast<double>(outcome.slots.linear.size());
  const double linear_s = std::accumulate(outcome.slots.linear.begin(), outcome.slots.linear.end(), 0.0) / slots;
  const double attention_s =
      attention > 0 ? std::accumulate(outcome.slots.attention.begin(), outcome.slots.attention.end(), 0.0) / slots : 0;
  const double rest_s = seconds - linear_s - attention_s;
  return linear_s * drawn_tokens / outcome.tokens + (attention > 0 ? attention_s * drawn_attention / attention : 0) +
         rest_s * drawn_work / outcome.work;
}

// auto's iteration: every candidate runs the micro-batches (one that refuses them sits out), and the
// fastest one's outcome counts. A deferring candidate (wlb) computes other documents than the batch's, so
// it is compared by the seconds it would take on the batch's at the rates it computed (seconds_for); for
// the others that is their seconds. Only the chosen try counts: every other candidate's held documents are put back as
// they were before the iteration. `sync_s`, the gradient synchronisation, is the same for every candidate: it only
// enters the times compared and recorded.
IterationOutcome run_auto(std::vector<Runner>& runners, const std::vector<std::string>& names,
                          const std::vector<Batch>& microbatches, double sync_s, AutoChoice& report) {
  const ModelShape& model = runners.front().cx.setup.model;
  double work = 0, tokens = 0;
  for (const Batch& b : microbatches) {
    work += batch_work(b, model);
    tokens += static_cast<double>(b.total_tokens());
  }
  std::vector<std::vector<std::vector<Document>>> held;
  held.reserve(runners.size());
  for (const Runner& runner : runners) held.push_back(runner.planner->held_documents());
  BatchChoice choice;
  IterationOutcome best = choose_fastest(
      names,
      [&](std::size_t i) {
        IterationOutcome outcome = runners[i].run(microbatches);
        double seconds = outcome.iteration_s + sync_s;
        if (std::abs(outcome.work - work) > 1e-9 * work) seconds = seconds_for(outcome, seconds, tokens, work, model);
        const double planning_s = outcome.planning_s;
        return CandidateRun<IterationOutcome>{std::move(outcome), seconds, planning_s};
      },
      choice);
  for (std::size_t i = 0; i < runners.size(); ++i) {
    if (names[i] != choice.chosen) runners[i].planner->restore_held_documents(held[i]);
  }
  report.record(choice);
  return best;
}

// Tokens the runners' planners hold for later iterations (auto's: only the chosen tries' are held).
double held_tokens(const std::vector<Runner>& runners) {
  double tokens = 0;
  for (const Runner& runner : runners) {
    for (const auto& level : runner.planner->held_documents()) {
      for (const Document& d : level) tokens += static_cast<double>(d.length);
    }
  }
  return tokens;
}

std::vector<Batch> draw(MicrobatchSource& source, int count) {
  std::vector<Batch> microbatches;
  microbatches.reserve(static_cast<std::size_t>(count));
  for (int m = 0; m < count; ++m) microbatches.push_back(source.next());
  return microbatches;
}

// The measured window's iterations into `result`: their times (with the gradient sync), planning, tokens,
// traffic, the mean breakdown over GPUs and iterations, the fullest GPU's memory, and the first iteration's
// trace and step balance.
void summarise_window(std::vector<IterationOutcome>& outcomes, double dp_sync_s, int slots,
                      const std::function<MemoryUse(const IterationOutcome&)>& memory_of, TrainingResult& result) {
  const double n = static_cast<double>(outcomes.size());
  for (std::size_t it = 0; it < outcomes.size(); ++it) {
    IterationOutcome& o = outcomes[it];
    const double iteration_s = o.iteration_s + dp_sync_s;
    result.iteration_s.push_back(iteration_s);
    result.planning_s += o.planning_s / n;
    result.unhidden_planning_s += std::max(0.0, o.planning_s - iteration_s) / n;
    result.tokens_per_iteration += o.tokens / n;
    result.attention_bytes += o.bytes / n;
    double attention_max = 0, attention_sum = 0;
    for (int r = 0; r < slots; ++r) {
      auto& b = result.breakdown;
      b.linear_s += o.slots.linear[r] / slots / n;
      b.attention_s += o.slots.attention[r] / slots / n;
      b.exposed_comm_s += o.slots.exposed[r] / slots / n;
      b.idle_s += (o.iteration_s - o.slots.linear[r] - o.slots.attention[r] - o.slots.exposed[r]) / slots / n;
      attention_max = std::max(attention_max, o.slots.attention[r]);
      attention_sum += o.slots.attention[r];
    }
    result.breakdown.dp_sync_s += dp_sync_s / n;
    result.attention_imbalance += (attention_sum > 0 ? attention_max * slots / attention_sum : 1.0) / n;
    const MemoryUse memory = memory_of(o);
    if (it == 0 || memory.total_bytes() > result.memory.total_bytes()) result.memory = memory;
    if (it == 0) {
      result.trace = std::move(o.trace);
      result.step_flops = step_balance(o.step_flops);
      result.step_attention = step_balance(o.step_attention_s);
    }
  }
  result.mean_iteration_s = std::accumulate(result.iteration_s.begin(), result.iteration_s.end(), 0.0) / n;
}

}  // namespace

bool parse_layer_schedule(std::string_view text, std::string_view field) {
  if (text != "whole" && text != "per-layer") fail("{} = '{}': must be whole or per-layer", field, text);
  return text == "whole";
}

bool overlaps_traffic(const std::string& planner) {
  return is_meta_planner(planner) || find_planner(planner).capabilities.overlaps_traffic;
}

int cp_degree_for(const TrainingConfig& config, const ModelShape& model, const HardwareModel& gpu) {
  if (is_meta_planner(config.planner)) return config.parallel.cp;  // 0: each candidate's own
  const PlannerRegistration& planner = find_planner(config.planner);
  if (planner.capabilities.cp_groups == CpGroups::kNone) return 1;
  if (config.parallel.cp > 0) return config.parallel.cp;
  // --cp-degree stands for the layout's cp when only it is given.
  if (config.planner_options.values().contains(cp_degree_option().name)) {
    return config.planner_options.get_int(cp_degree_option());
  }
  const int dp = config.parallel.dp();
  if (planner.capabilities.cp_groups == CpGroups::kWithinGroup) return powers_of_two_dividing(dp, 8).back();
  const auto options = powers_of_two_dividing(dp, 64);
  for (int cp : options) {
    if (keeps_documents_whole(config, model, gpu, cp)) return cp;
  }
  return options.back();
}

bool keeps_documents_whole(const TrainingConfig& config, const ModelShape& model, const HardwareModel& gpu, int cp) {
  const auto planner = make_planner(config.planner, training_planner_options(config, model, gpu));
  return planner->longest_whole_document(config.rank_tokens(), cp) >= config.max_doc_len;
}

PlannerOptions training_planner_options(const TrainingConfig& config, const ModelShape& model,
                                        const HardwareModel& gpu) {
  PlannerOptions options = config.planner_options;
  options.model = model;
  // The simulator's ranks are TP groups, so a machine holds devices_per_node / tp of them.
  options.devices_per_machine = std::max(1, gpu.devices_per_node / config.parallel.tp);
  const PlannerRegistration& planner = find_planner(config.planner);
  if (planner.capabilities.cp_groups != CpGroups::kNone) options.set(cp_degree_option().name, config.parallel.cp);
  // Sizes that may not exceed a rank's tokens are clamped to them: short micro-batches (a layout
  // search) stay plannable.
  for (const OptionSpec& spec : planner.options) {
    if (spec.at_most_tokens_per_rank) {
      options.set(spec.name, std::min(options.get(spec), static_cast<double>(config.rank_tokens())));
    }
  }
  return options;
}

TrainingResult simulate_training(const TrainingConfig& config, const ModelShape& model, const HardwareModel& gpu) {
  model.validate();
  gpu.validate();
  config.validate(gpu, model);
  const ParallelConfig& par = config.parallel;
  const bool is_auto = is_meta_planner(config.planner);
  std::vector<std::string> names = is_auto ? config.candidates : std::vector<std::string>{config.planner};
  if (names.empty()) names = default_auto_candidates(AutoScope::kRun);
  std::vector<Runner> runners;
  runners.reserve(names.size());
  for (const auto& name : names) {
    runners.push_back(make_runner(is_auto ? candidate_config(config, name, model, gpu) : config, model, gpu));
  }
  const Context& cx = runners.front().cx;  // the layout, the same for every candidate
  MicrobatchSource source(config, cx.dp, model);

  // Gradients (bf16) of the GPU's share of the parameters, reduced over all dp groups of the stage (as
  // Megatron-LM reduces over data x context parallel ranks); they sit in different nodes once a stage's
  // TP groups outgrow one.
  const int replicas = cx.dp;
  const double gradient_bytes = 2 * layer_parameters(model) * cx.stage_layers / par.tp;
  const double dp_sync_s = dp_gradient_sync_s(gpu, replicas, par.tp * cx.dp > gpu.devices_per_node, gradient_bytes);

  TrainingResult result;
  result.config = config;
  result.model = model.name;
  result.hardware = gpu.name;
  std::vector<IterationOutcome> outcomes;
  outcomes.reserve(static_cast<std::size_t>(std::max(config.iterations, 0)));
  std::vector<Batch> microbatches;
  if (is_auto) result.auto_choice.emplace();
  const auto run_iteration = [&](AutoChoice& report) {
    microbatches = draw(source, cx.microbatches);
    return is_auto ? run_auto(runners, names, microbatches, dp_sync_s, report) : runners.front().run(microbatches);
  };
  // The warm-up fills a deferring planner's queue, so that the measured window starts with a queue like
  // the one it ends with and carries both over (nothing is drained into the window). A planner that holds
  // nothing between iterations only draws the warm-up's data: every planner's window sees the same batches.
  const bool defers = std::any_of(names.begin(), names.end(), [](const std::string& name) {
    return find_planner(name).capabilities.defers_documents;
  });
  AutoChoice warmup_report;
  for (int it = 0; it < config.warmup_iterations; ++it) {
    if (defers) {
      (void)run_iteration(warmup_report);
    } else {
      (void)draw(source, cx.microbatches);
    }
  }
  AutoChoice& report = is_auto ? *result.auto_choice : warmup_report;  // only auto's is read
  const double held_at_start = held_tokens(runners);
  double drawn_work = 0, computed_work = 0;
  for (int it = 0; it < config.iterations; ++it) {
    outcomes.push_back(run_iteration(report));
    for (const Batch& b : microbatches) drawn_work += batch_work(b, model);
    computed_work += outcomes.back().work;
  }
  result.carried_tokens = held_tokens(runners) - held_at_start;
  result.computed_work_share = computed_work / drawn_work;
  summarise_window(
      outcomes, dp_sync_s, cx.pp * cx.dp,
      [&](const IterationOutcome& o) {
        return memory_per_gpu(model, gpu, par, config.memory,
                              {o.tokens_in_flight, o.microbatch_tokens, o.attention_buffers});
      },
      result);
  const double n = static_cast<double>(outcomes.size());
  // The rate it computed at (FLOPs per second) applied to the window's data: what the queue took in
  // or gave out over the window is valued at that rate, the same for every planner.
  const double drawn_tokens_per_iteration = result.tokens_per_iteration + result.carried_tokens / n;
  result.tokens_per_s = drawn_tokens_per_iteration * result.computed_work_share / result.mean_iteration_s;
  return result;
}

nlohmann::json TrainingResult::to_json() const {
  const auto& c = config;
  nlohmann::json j = {
      {"planner", c.planner},
      {"mode", to_string(c.mode)},
      {"model", model},
      {"hardware", hardware},
      {"gpus", c.parallel.gpus},
      {"tp", c.parallel.tp},
      {"dp", c.parallel.dp()},
      {"pp", c.parallel.pp},
      {"cp", c.parallel.cp},
      {"microbatches", c.parallel.microbatch_count()},
      {"dataset", c.dataset},
      {"boundary_split", to_string(c.boundary_split)},
      {"layer_schedule", c.whole_layer ? "whole" : "per-layer"},
      {"recompute", to_string(c.memory.recompute)},
      {"zero1", c.memory.zero1},
      {"mask", c.mask},
      {"max_doc_len", c.max_doc_len},
      {"tokens_per_rank", c.rank_tokens()},
      {"iterations", c.iterations},
      {"warmup_iterations", c.warmup_iterations},
      {"carried_tokens", carried_tokens},
      {"computed_work_share", computed_work_share},
      {"seed", c.seed},
      {"iteration_s", iteration_s},
      {"mean_iteration_s", mean_iteration_s},
      {"tokens_per_iteration", tokens_per_iteration},
      {"tokens_per_s", tokens_per_s},
      {"planning_s", planning_s},
      {"unhidden_planning_s", unhidden_planning_s},
      {"breakdown",
       {{"linear_s", breakdown.linear_s},
        {"attention_s", breakdown.attention_s},
        {"exposed_comm_s", breakdown.exposed_comm_s},
        {"idle_s", breakdown.idle_s},
        {"dp_sync_s", breakdown.dp_sync_s}}},
      {"attention_imbalance", attention_imbalance},
      {"step_balance",
       {{"flops",
         {{"worker", step_flops.worker}, {"step_mean", step_flops.step_mean}, {"step_sync", step_flops.step_sync}}},
        {"attention_s",
         {{"worker", step_attention.worker},
          {"step_mean", step_attention.step_mean},
          {"step_sync", step_attention.step_sync}}}}},
      {"attention_bytes", attention_bytes},
      {"memory", memory.to_json()}};
  if (auto_choice) j[c.planner] = auto_choice->to_json();  // keyed by the meta-planner that chose
  return j;
}

}  // namespace fulcrum::sim
