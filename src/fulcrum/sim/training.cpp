#include "fulcrum/sim/training.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/cost/model_cost.hpp"
#include "fulcrum/planners/baselines/perdoc_cp.hpp"
#include "fulcrum/sim/iteration.hpp"
#include "fulcrum/sim/microbatch_source.hpp"
#include "fulcrum/sparse/dynamic_mask.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
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
  if (cp_groups && cp_degree > 0 && cp_degree != parallel.cp) {  // 0: the default
    fail("cp-degree = {}: disagrees with cp = {} (the simulator's CP degree is the layout's; give one of them)",
         cp_degree, parallel.cp);
  }
  if (!cp_groups && parallel.cp != 1) {
    fail("cp = {}: planner {} does not plan in context-parallel groups (cp must be 1)", parallel.cp, planner);
  }
}

namespace {

// What a candidate's tries computed, summed over iterations: its seconds (with the gradient sync), the
// average GPU's matrix and attention seconds among them, and the tokens and forward FLOPs it computed.
struct ComputedRates {
  double seconds = 0, linear_s = 0, attention_s = 0, tokens = 0, work = 0;
  void add(const IterationOutcome& outcome, double sync_s) {
    const auto slots = static_cast<double>(outcome.slots.linear.size());
    seconds += outcome.iteration_s + sync_s;
    linear_s += std::accumulate(outcome.slots.linear.begin(), outcome.slots.linear.end(), 0.0) / slots;
    attention_s += std::accumulate(outcome.slots.attention.begin(), outcome.slots.attention.end(), 0.0) / slots;
    tokens += outcome.tokens;
    work += outcome.work;
  }
  ComputedRates& operator+=(const ComputedRates& o) {
    seconds += o.seconds;
    linear_s += o.linear_s;
    attention_s += o.attention_s;
    tokens += o.tokens;
    work += o.work;
    return *this;
  }
};

// One planner's iterations: its planner, its layer setup (its comm mode) and its schedule.
struct Runner {
  std::unique_ptr<Planner> planner;
  IterationContext cx;
  bool phase_aligned = false;
  // auto's deferring candidate also runs as the fixed planner it is, on every iteration's batches: what
  // that planner computes over the run is its rate (its tries as auto's candidate start from a queue that
  // only the iterations it was chosen moved on).
  std::unique_ptr<Planner> as_fixed;
  ComputedRates fixed_rates;
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
      nullptr,
      {}};
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

// The seconds `rates` would take on `drawn_tokens` and `drawn_work` FLOPs, each part at its own rate: its
// matrix seconds scale with the tokens, its attention seconds with the attention FLOPs, the rest (traffic,
// idle, sync) with all FLOPs. A try that defers the long documents computes mostly matrix work, which runs
// at a lower rate per FLOP than attention: one rate per FLOP for everything made wlb's tries look 9% slower
// than they were where its steady state beat DistCA by 2%.
double seconds_for(const ComputedRates& rates, double drawn_tokens, double drawn_work, const ModelShape& model) {
  if (rates.work <= 0 || rates.tokens <= 0) return std::numeric_limits<double>::infinity();
  const double per_token = linear_forward_flops_per_token(model);
  const double attention = rates.work - per_token * rates.tokens;
  const double drawn_attention = drawn_work - per_token * drawn_tokens;
  const double attention_s = attention > 0 ? rates.attention_s : 0;
  const double rest_s = rates.seconds - rates.linear_s - attention_s;
  return rates.linear_s * drawn_tokens / rates.tokens +
         (attention > 0 ? attention_s * drawn_attention / attention : 0) + rest_s * drawn_work / rates.work;
}

// auto's iteration: every candidate runs the micro-batches (one that refuses them sits out), and the
// fastest one's outcome counts. `sync_s`, the gradient synchronisation, is the same for every candidate: it
// only enters the times compared and recorded. The candidates that compute exactly the batch (listed first)
// are compared by their seconds. A deferring one (wlb) computes other documents than the batch's, and what
// it defers now costs in later iterations, so its try's seconds say little: it is compared by the seconds
// its fixed run's rate gives the batch (seconds_for), times how much harder this batch is than the average
// one for the fastest exact candidates (`fastest_exact`, their run so far). So auto follows wlb when wlb as
// a fixed planner outruns auto's per-batch choice among the others, whatever its queue does on one batch:
// its own tries' rate (the first version) chose DistCA whenever a try released held documents, and so
// never released them, 10% behind wlb over 64 iterations. Only the chosen try counts: every other
// candidate's held documents are put back as they were before the iteration. In the warm-up
// (`warmup`) auto takes the deferring candidate's try whatever the times: it fills that candidate's queue
// as its fixed run does, so the two start the window alike (and the rates gather their first iterations).
IterationOutcome run_auto(std::vector<Runner>& runners, const std::vector<std::string>& names,
                          const std::vector<Batch>& microbatches, double sync_s, bool warmup,
                          ComputedRates& fastest_exact, AutoChoice& report) {
  const ModelShape& model = runners.front().cx.setup.model;
  double work = 0, tokens = 0;
  for (const Batch& b : microbatches) {
    work += batch_work(b, model);
    tokens += static_cast<double>(b.total_tokens());
  }
  std::vector<std::vector<std::vector<Document>>> held;
  held.reserve(runners.size());
  for (const Runner& runner : runners) held.push_back(runner.planner->held_documents());
  double fastest_exact_s = std::numeric_limits<double>::infinity();
  ComputedRates fastest_exact_try;
  bool noted = false;  // this iteration's fastest exact try is in `fastest_exact`
  BatchChoice choice;
  IterationOutcome best = choose_fastest(
      names,
      [&](std::size_t i) {
        Runner& r = runners[i];
        IterationOutcome outcome = r.run(microbatches);
        double seconds = outcome.iteration_s + sync_s;
        if (!r.as_fixed) {
          if (seconds < fastest_exact_s) {
            fastest_exact_s = seconds;
            fastest_exact_try = {};
            fastest_exact_try.add(outcome, sync_s);
          }
          if (warmup) seconds = std::numeric_limits<double>::infinity();
        } else {
          if (!noted && std::isfinite(fastest_exact_s)) fastest_exact += fastest_exact_try;
          noted = noted || std::isfinite(fastest_exact_s);
          r.fixed_rates.add(r.run_with(*r.as_fixed, microbatches), sync_s);
          seconds = seconds_for(r.fixed_rates, tokens, work, model);
          if (noted) seconds *= fastest_exact_s / seconds_for(fastest_exact, tokens, work, model);
        }
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

// The planners a run simulates: the planner, or auto's candidates (default: every one that may be), those
// that compute exactly their batch first (auto values a deferring candidate by their time on the batch).
std::vector<std::string> runner_names(const TrainingConfig& config) {
  if (!is_meta_planner(config.planner)) return {config.planner};
  std::vector<std::string> names = config.candidates;
  if (names.empty()) names = default_auto_candidates(AutoScope::kRun);
  std::stable_partition(names.begin(), names.end(),
                        [](const std::string& name) { return !find_planner(name).capabilities.defers_documents; });
  return names;
}

// A runner per name; auto's runners each with its candidate's configuration, a deferring one also with the
// fixed planner that values it.
std::vector<Runner> make_runners(const TrainingConfig& config, const std::vector<std::string>& names,
                                 const ModelShape& model, const HardwareModel& gpu) {
  const bool is_auto = is_meta_planner(config.planner);
  std::vector<Runner> runners;
  runners.reserve(names.size());
  for (const auto& name : names) {
    const TrainingConfig runner_config = is_auto ? candidate_config(config, name, model, gpu) : config;
    runners.push_back(make_runner(runner_config, model, gpu));
    if (is_auto && find_planner(name).capabilities.defers_documents) {
      runners.back().as_fixed = make_planner(name, training_planner_options(runner_config, model, gpu));
    }
  }
  return runners;
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
  // --cp-degree stands for the layout's cp when only it is given (0, as for cp, is the default).
  if (config.planner_options.values().contains(cp_degree_option().name) &&
      config.planner_options.get_int(cp_degree_option()) > 0) {
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
  const std::vector<std::string> names = runner_names(config);
  std::vector<Runner> runners = make_runners(config, names, model, gpu);
  const IterationContext& cx = runners.front().cx;  // the layout, the same for every candidate
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
  ComputedRates fastest_exact;  // auto's: the fastest exact candidate's try of every iteration so far
  const auto run_iteration = [&](bool warmup, AutoChoice& report) {
    microbatches = draw(source, cx.microbatches);
    return is_auto ? run_auto(runners, names, microbatches, dp_sync_s, warmup, fastest_exact, report)
                   : runners.front().run(microbatches);
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
      (void)run_iteration(true, warmup_report);
    } else {
      (void)draw(source, cx.microbatches);
    }
  }
  AutoChoice& report = is_auto ? *result.auto_choice : warmup_report;  // only auto's is read
  const double held_at_start = held_tokens(runners);
  double drawn_work = 0, computed_work = 0;
  for (int it = 0; it < config.iterations; ++it) {
    outcomes.push_back(run_iteration(false, report));
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
