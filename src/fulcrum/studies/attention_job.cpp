#include "fulcrum/studies/attention_job.hpp"
#include "fulcrum/kernels/kernel_threads.hpp"
#include "fulcrum/kernels/timing.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/core/memory_budget.hpp"
#include "fulcrum/core/statistics.hpp"
#include "fulcrum/plan/program_verify.hpp"
#include "fulcrum/plan/serialize.hpp"
#include "fulcrum/plan/stats.hpp"
#include "fulcrum/studies/dynamic_masks.hpp"
#include "fulcrum/workload/head_masks.hpp"
#include "fulcrum/workload/length_source.hpp"
#include "fulcrum/workload/model_config.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>

namespace fulcrum::studies {

// The job drives the runtime (executor, communicator, data) from outside it.
using namespace runtime;  // NOLINT(google-build-using-namespace)

namespace {

// RankSummary as numbers, for medians and all_gather; the order is the struct's.
constexpr std::size_t kSummaryFields = 10;
std::array<double, kSummaryFields> encode_summary(const RankSummary& s) {
  return {s.attention_s, s.attention_cpu_s, s.other_compute_s, s.comm_s,         s.exposed_comm_s,
          s.peer_wait_s, s.total_s,         s.bytes_sent,      s.bytes_received, s.flops};
}
RankSummary decode_summary(const double* v) { return {v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9]}; }

// Every rank's launch start times ([rank][launch id], -1 for none), then the wait attribution.
void attribute(const Plan& plan, ExecutionResult& result, Communicator& comm) {
  int ids = 0;
  for (const auto& p : plan.programs) {
    for (const auto& i : p.instructions) {
      if (const auto* l = std::get_if<CommLaunch>(&i.op)) ids = std::max(ids, l->id + 1);
    }
  }
  std::vector<double> mine(static_cast<std::size_t>(ids), -1.0);
  for (const auto& rec : result.launches) mine[rec.id] = rec.launched_s;
  const auto all = comm.all_gather(mine);
  std::vector<std::vector<double>> launched(static_cast<std::size_t>(comm.size()));
  for (int r = 0; r < comm.size(); ++r) {
    launched[r].assign(all.begin() + r * ids, all.begin() + (r + 1) * ids);
  }
  attribute_waits(plan, comm.rank(), launched, result);
}

RankSummary median_summary(const std::vector<RankSummary>& runs) {
  std::array<double, kSummaryFields> out{};
  for (std::size_t f = 0; f < kSummaryFields; ++f) {
    std::vector<double> values;
    values.reserve(runs.size());
    for (const auto& r : runs) values.push_back(encode_summary(r)[f]);
    out[f] = median(values);
  }
  return decode_summary(out.data());
}

// Timeline events travel as numbers: names by index into this table.
constexpr std::array<const char*, 8> kEventNames = {"attention", "attention-backward", "copy",  "merge", "sum",
                                                    "wait",      "dispatch",           "return"};
constexpr std::size_t kEventFields = 8;

Timeline gather_timeline(const std::vector<TimelineEvent>& mine, Communicator& comm) {
  const double count = static_cast<double>(mine.size());
  const auto counts = comm.all_gather(std::span<const double>(&count, 1));
  const auto most = static_cast<std::size_t>(*std::max_element(counts.begin(), counts.end()));
  std::vector<double> encoded(most * kEventFields, -1.0);
  for (std::size_t i = 0; i < mine.size(); ++i) {
    const auto& e = mine[i];
    const auto name = std::find_if(kEventNames.begin(), kEventNames.end(), [&](const char* n) { return e.name == n; }) -
                      kEventNames.begin();
    const double row[kEventFields] = {static_cast<double>(e.rank),
                                      e.track == Track::kComm ? 1.0 : 0.0,
                                      static_cast<double>(e.stream),
                                      static_cast<double>(name),
                                      e.start_s,
                                      e.end_s,
                                      e.bytes,
                                      e.flops};
    std::copy(row, row + kEventFields, encoded.begin() + static_cast<std::ptrdiff_t>(i * kEventFields));
  }
  const auto all = comm.all_gather(encoded);
  Timeline t;
  for (std::size_t i = 0; i + kEventFields <= all.size(); i += kEventFields) {
    const double* v = &all[i];
    if (v[0] < 0) continue;  // padding
    t.events.push_back({static_cast<int>(v[0]), v[1] > 0 ? Track::kComm : Track::kCompute, static_cast<int>(v[2]),
                        kEventNames.at(static_cast<std::size_t>(v[3])), v[4], v[5], v[6], v[7]});
  }
  return t;
}

std::size_t count_messages(const Plan& plan) {
  std::size_t n = 0;
  for (const auto& p : plan.programs) {
    for (const auto& i : p.instructions) {
      if (const auto* l = std::get_if<CommLaunch>(&i.op)) n += l->sends.size();
    }
  }
  return n;
}

void check_plan(const Plan& plan, const Batch& batch) {
  const auto report = verify_plan(plan, batch);
  if (!report.ok()) fail_runtime("the compiled {} plan fails verify_plan: {}", to_string(plan.pass), report.summary());
}

// <folder>/<planner>.<mode>.<pass>.<plan_format>.
void save_plans(const JobConfig& config, const Plan& forward, const Plan& backward) {
  const std::filesystem::path folder(config.save_plans);
  std::filesystem::create_directories(folder);
  const bool json = config.plan_format == "json";
  const char* mode = to_string(config.mode);
  for (const Plan* plan : {&forward, &backward}) {
    const auto name = fmt::format("{}.{}.{}.{}", config.planner, mode, to_string(plan->pass), json ? "json" : "fcpl");
    save_plan(*plan, (folder / name).string());
  }
}

using kernels::ScopedKernelThreads;

}  // namespace

void JobConfig::validate(int ranks) const {
  validate_batch_shape(ranks, tokens_per_rank);
  if (!parse_dynamic_mask(mask)) MaskSpec::parse(mask);
  make_length_source(dataset, seed, tokens_per_rank);
  if (is_meta_planner(planner)) {
    sim::check_auto_inputs(candidates, hardware);
  } else {
    make_planner(planner, planner_options());
  }
  if (repeats < 1 || repeats > 1000) fail("repeats = {}: must be in [1, 1000]", repeats);
  if (plan_format != "fcpl" && plan_format != "json") fail("plan-format = '{}': must be fcpl or json", plan_format);
  // Ranks are processes or threads of this machine: every rank's Q/K/V/O and gradients, what it receives
  // (about as much again) and the reference's copies all come out of its memory.
  const ModelShape shape = resolve_model_shape(model);
  check_memory_estimate(fmt::format("tokens-per-rank = {} on {} ranks", tokens_per_rank, ranks),
                        3.0 * ranks *
                            kernels::measured_call_bytes({shape.q_heads, shape.kv_heads, shape.head_dim, 0},
                                                         tokens_per_rank, tokens_per_rank));
  if (threads < 0 || threads > 1024) fail("threads = {}: must be in [0, 1024] (0 = automatic)", threads);
}

PlannerOptions JobConfig::planner_options() const {
  PlannerOptions o = options;
  o.model = resolve_model_shape(model);
  return o;
}

namespace {

// The per-step tables of a finished job: plans' work, and measured attention time per (rank, stream).
void add_step_tables(JobResult& result, const Plan& forward, const Plan& backward) {
  const PlanSteps f = plan_steps(forward), b = plan_steps(backward);
  auto add = [](StepMatrix x, const StepMatrix& y) {
    for (std::size_t r = 0; r < x.size(); ++r) {
      for (std::size_t t = 0; t < x[r].size() && t < y[r].size(); ++t) x[r][t] += y[r][t];
    }
    return x;
  };
  result.step_flops = add(f.flops, b.flops);
  result.step_active_tiles = f.active_tiles;
  result.step_bytes = add(f.bytes_sent, b.bytes_sent);
  result.step_attention_s.assign(f.flops.size(), std::vector<double>(f.flops.front().size(), 0));
  for (const auto& e : result.timeline.events) {
    if (e.track != Track::kCompute || e.flops <= 0) continue;
    auto& row = result.step_attention_s[static_cast<std::size_t>(e.rank)];
    if (static_cast<std::size_t>(e.stream) < row.size()) row[static_cast<std::size_t>(e.stream)] += e.end_s - e.start_s;
  }
}

}  // namespace

double JobResult::max_error() const { return *std::max_element(relative_error.begin(), relative_error.end()); }

namespace {

// What every rank draws alike from the seed: the batch (with its estimated masks for a dynamic mask),
// the head layout, and the token data its Q/K/V/dO come from.
struct JobInputs {
  Batch batch;
  HeadLayout heads;
  std::unique_ptr<TokenData> data;
  std::optional<DynamicMaskStats> dynamic_stats;
};

JobInputs draw_inputs(const JobConfig& config, const PlannerOptions& options, Communicator& comm) {
  auto source = make_length_source(config.dataset, config.seed, config.tokens_per_rank);
  const auto dynamic = parse_dynamic_mask(config.mask);
  BatchStream stream([&] { return source->next(); }, comm.size(), config.tokens_per_rank,
                     dynamic ? MaskSpec::causal() : MaskSpec::parse(config.mask), config.boundary_split);
  JobInputs in{stream.next(), head_layout(options.model, 4), nullptr, std::nullopt};
  Batch& batch = in.batch;
  if (!dynamic) {
    Tokens longest = 0;
    for (const auto& d : batch.documents) longest = std::max(longest, d.length);
    check_mask_reach(MaskSpec::parse(config.mask), longest, "mask");
  }
  // A dynamic mask is estimated from the attention itself, so its data must have a pattern to find.
  if (dynamic) {
    in.data = std::make_unique<SyntheticTokenData>(config.seed, in.heads, batch);
  } else {
    in.data = std::make_unique<HashedTokenData>(config.seed);
  }
  if (dynamic) in.dynamic_stats = estimate_dynamic_masks(batch, in.heads, *in.data, *dynamic, comm);
  return in;
}

// The batch's Assignment: the named planner's, verified, or for auto the candidate whose plan simulates
// fastest (recorded in `auto_choice`).
Assignment plan_batch(const JobConfig& config, const PlannerOptions& options, const Batch& batch,
                      std::optional<sim::AutoChoice>& auto_choice) {
  Assignment a;
  if (is_meta_planner(config.planner)) {
    // Every rank chooses the same way: the simulation is deterministic.
    sim::BatchChoice choice = sim::choose_plan(batch, config.candidates, options,
                                               sim::gpu_per_rank(options.model, config.hardware, config.mode));
    auto_choice.emplace().record(choice);
    a = std::move(choice.assignment);
  } else {
    auto planner = make_planner(config.planner, options);
    a = plan_verified(*planner, batch);
  }
  return a;
}

struct CompiledPlans {
  Plan forward, backward;
};

CompiledPlans compile_and_check(const JobConfig& config, const Assignment& a, const HeadLayout& heads,
                                const Communicator& comm) {
  CompiledPlans plans{compile(a, heads, Pass::kForward, config.mode), compile(a, heads, Pass::kBackward, config.mode)};
  // Every rank compiled the same plans, so one check is enough; a failure there aborts the job, and the
  // others wait for it at the barrier before the first pass.
  if (comm.rank() == 0) {
    check_plan(plans.forward, a.batch);
    check_plan(plans.backward, a.batch);
  }
  if (!config.save_plans.empty() && comm.rank() == 0) save_plans(config, plans.forward, plans.backward);
  return plans;
}

// One pass on filled buffers, between barriers so that every rank starts together; how long a rank then
// waits for the slowest goes to `idle_s`.
ExecutionResult timed_pass(const Plan& plan, RankBuffers& buffers, Communicator& comm, const ExecuteOptions& exec,
                           std::vector<double>& idle_s) {
  comm.barrier();
  auto result = execute(plan, buffers, comm, exec);
  const double done = Communicator::now_s();
  comm.barrier();
  attribute(plan, result, comm);
  idle_s.push_back(Communicator::now_s() - done);
  return result;
}

// This rank's measurements over the repetitions, and the buffers of the last one (for the reference).
struct PassRuns {
  std::vector<RankSummary> forward, backward;
  std::vector<double> forward_idle_s, backward_idle_s;
  std::vector<TimelineEvent> events;  // the last repetition's, forward then backward
  std::optional<RankBuffers> forward_buffers, backward_buffers;
};

PassRuns run_passes(const JobConfig& config, const CompiledPlans& plans, const JobInputs& in, const Batch& batch,
                    Communicator& comm) {
  const int rank = comm.rank();
  const ExecuteOptions exec{Communicator::now_s(), config.deterministic};
  PassRuns runs;
  auto& fb = runs.forward_buffers;
  auto& bb = runs.backward_buffers;
  for (int rep = 0; rep < config.repeats; ++rep) {
    fb.emplace(plans.forward.programs[rank], in.heads);
    fill_inputs(plans.forward, batch, *in.data, *fb);
    auto fr = timed_pass(plans.forward, *fb, comm, exec, runs.forward_idle_s);

    bb.emplace(plans.backward.programs[rank], in.heads);
    fill_inputs(plans.backward, batch, *in.data, *bb);
    for (const char* name : {"o", "lse"}) bb->copy_from(*fb, name);  // forward outputs, backward inputs
    auto br = timed_pass(plans.backward, *bb, comm, exec, runs.backward_idle_s);

    runs.forward.push_back(fr.summary);
    runs.backward.push_back(br.summary);
    if (rep + 1 == config.repeats) {
      runs.events = std::move(fr.events);
      runs.events.insert(runs.events.end(), br.events.begin(), br.events.end());
    }
  }
  return runs;
}

// Errors: the largest difference and reference value per tensor over all ranks; -1 where not checked.
std::array<double, 5> relative_errors(const JobConfig& config, const CompiledPlans& plans, PassRuns& runs,
                                      const Batch& batch, const TokenData& data, Communicator& comm) {
  std::array<double, 5> relative_error{};
  relative_error.fill(-1);
  if (moves_data(config.mode) && config.reference != ReferenceKind::kNone) {
    const auto parts = compare_with_reference(plans.forward, *runs.forward_buffers, plans.backward,
                                              *runs.backward_buffers, batch, data, config.reference);
    std::vector<double> mine(parts.max_diff.begin(), parts.max_diff.end());
    mine.insert(mine.end(), parts.max_ref.begin(), parts.max_ref.end());
    const auto all = comm.all_gather(mine);
    for (std::size_t t = 0; t < 5; ++t) {
      double diff = 0, ref = 0;
      for (std::size_t r = 0; r < static_cast<std::size_t>(comm.size()); ++r) {
        diff = std::max(diff, all[r * 10 + t]);
        ref = std::max(ref, all[r * 10 + 5 + t]);
      }
      relative_error[t] = ref > 0 ? diff / ref : diff;
    }
  }
  return relative_error;
}

// Every rank's medians and idle times, into `result` on every rank.
void gather_rank_summaries(const PassRuns& runs, Communicator& comm, JobResult& result) {
  std::vector<double> mine;
  for (const auto& s : {median_summary(runs.forward), median_summary(runs.backward)}) {
    const auto v = encode_summary(s);
    mine.insert(mine.end(), v.begin(), v.end());
  }
  mine.push_back(median(runs.forward_idle_s));
  mine.push_back(median(runs.backward_idle_s));
  const auto all = comm.all_gather(mine);
  const std::size_t stride = mine.size();
  for (int r = 0; r < comm.size(); ++r) {
    const double* v = &all[static_cast<std::size_t>(r) * stride];
    result.forward.push_back(decode_summary(v));
    result.backward.push_back(decode_summary(v + kSummaryFields));
    result.forward_idle_s.push_back(v[2 * kSummaryFields]);
    result.backward_idle_s.push_back(v[2 * kSummaryFields + 1]);
  }
}

}  // namespace

JobResult run_attention_job(const JobConfig& config, Communicator& comm) {
  config.validate(comm.size());
  const ScopedKernelThreads threads(config.threads > 0 ? config.threads
                                                       : std::max(1, omp_get_num_procs() / comm.size()));

  const PlannerOptions options = config.planner_options();
  const JobInputs in = draw_inputs(config, options, comm);
  std::optional<sim::AutoChoice> auto_choice;
  const Assignment a = plan_batch(config, options, in.batch, auto_choice);
  const CompiledPlans plans = compile_and_check(config, a, in.heads, comm);

  JobResult result;
  result.config = config;
  result.ranks = comm.size();
  result.planned_imbalance = compute_stats(a, options.model).imbalance;
  result.packed_imbalance = placement_imbalance(in.batch, options.model);
  result.tasks = a.tasks.size();
  result.auto_choice = std::move(auto_choice);
  result.dynamic_masks = in.dynamic_stats;
  result.messages = count_messages(plans.forward) + count_messages(plans.backward);

  comm.barrier();
  PassRuns runs = run_passes(config, plans, in, a.batch, comm);
  result.relative_error = relative_errors(config, plans, runs, a.batch, *in.data, comm);
  gather_rank_summaries(runs, comm, result);
  result.timeline = gather_timeline(runs.events, comm);
  add_step_tables(result, plans.forward, plans.backward);
  result.forward_plan = plans.forward;
  result.backward_plan = plans.backward;
  return result;
}

}  // namespace fulcrum::studies
