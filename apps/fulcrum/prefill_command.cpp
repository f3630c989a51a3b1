// `fulcrum prefill`: a Llama-shaped decoder's prefill on real ranks with per-head masks and a head
// assignment (FlexAttn's runtime: WPR, CPIP), checked against a single-process fp64 reference. Ranks are
// MPI processes (re-launched under mpiexec like `fulcrum run`) or threads (--backend local). Every input
// is checked, and the weights file written if absent, before any rank starts.
#include "commands.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/core/text.hpp"
#include "fulcrum/cost/hardware_model.hpp"
#include "fulcrum/planners/heads/scenarios.hpp"
#include "fulcrum/planners/heads/solver.hpp"
#include "fulcrum/prefill/gemm.hpp"
#include "fulcrum/prefill/head_plan.hpp"
#include "fulcrum/prefill/reference.hpp"
#include "fulcrum/prefill/weights_file.hpp"
#include "fulcrum/runtime/local_communicator.hpp"
#include "fulcrum/runtime/mpi_communicator.hpp"
#include "fulcrum/workload/model_config.hpp"
#include "job_session.hpp"
#include "outputs.hpp"
#include "prefill_output.hpp"
#include "prefill_simulate.hpp"

#include <cmath>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

namespace fulcrum::cli {

std::vector<bool> switches(const std::string& text, const char* field) {
  std::vector<bool> out;
  for (auto f : split_fields(text, ',')) {
    if (f != "0" && f != "1") fail("{} = '{}': must be 0, 1 or 0,1", field, text);
    const bool value = f == "1";
    if (std::find(out.begin(), out.end(), value) == out.end()) out.push_back(value);
  }
  if (out.empty()) fail("{} = '{}': must be 0, 1 or 0,1", field, text);
  return out;
}

std::vector<std::string> solver_names(const std::string& text) {
  std::vector<std::string> out;
  for (auto f : split_fields(text, ',')) {
    std::string name(heads::find_head_solver(f).name);
    if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(std::move(name));
  }
  if (out.empty()) fail("solver = '{}': name at least one of {}", text, fmt::join(heads::head_solver_names(), ", "));
  return out;
}

namespace {

struct PrefillArgs {
  int ranks = 0;  // 0: every process mpiexec started, else 2
  std::string backend = "mpi";
  std::string model = "small-gqa";
  long tokens = 2048;
  std::string weights;  // default: fulcrum-<model>.weights
  std::uint64_t seed = 1;
  std::string wpr = "1", cpip = "1";
  std::string assignment;  // a JSON file (exclusive with solver)
  std::string solver;      // comma list of head solvers; empty: lpt-ls unless an assignment file is given
  std::string patterns = "mixed";
  std::string profile;  // runtime profile for the cost model; empty: analytic
  bool check = false;
  double max_error = 1e-5;
  int repeats = 1;
  int threads = 0;
  double timeout_s = 120;
  std::string json;
  int inject_failure = -1;  // testing: this rank's read of layer 1's attention weights fails
  std::string simulate;     // a GPU preset or hardware file: simulate instead of running ranks
};

// One configuration run side by side: which head plan (solver), WPR and CPIP.
struct PrefillConfig {
  std::size_t plan = 0;
  bool wpr = true;
  bool cpip = true;
};

// Everything every rank needs, checked once in the launching process (and again, cheaply, on each rank).
struct PrefillJob {
  PrefillArgs args;
  std::vector<heads::ModelPlan> plans;      // one per solver (or the assignment file)
  std::vector<prefill::PrefillSpec> specs;  // per plan: the same masks, that plan's assignment
  std::vector<PrefillConfig> configs;
  PrefillRunInfo info;
};

PrefillJob make_job(const PrefillArgs& requested) {
  PrefillJob job;
  job.args = requested;
  auto& a = job.args;
  if (a.ranks == 0) {
    const char* world = std::getenv("OMPI_COMM_WORLD_SIZE");
    a.ranks = started_by_mpiexec() && world ? std::atoi(world) : 2;
  }
  if (a.ranks < 1 || a.ranks > 1024)
    fail("ranks = {}: must be in [1, 1024] (0: the mpiexec world size, else 2)", a.ranks);
  if (a.backend != "mpi" && a.backend != "local") fail("backend = '{}': must be mpi or local", a.backend);
  if (a.tokens < 1 || a.tokens > (1L << 24)) fail("tokens = {}: must be in [1, {}]", a.tokens, 1L << 24);
  if (a.repeats < 1 || a.repeats > 1000) fail("repeats = {}: must be in [1, 1000]", a.repeats);
  if (a.threads < 0 || a.threads > 1024) fail("threads = {}: must be in [0, 1024] (0 = automatic)", a.threads);
  if (!(a.timeout_s > 0 && a.timeout_s <= 86400)) fail("timeout = {}: must be in (0, 86400] s", a.timeout_s);
  if (!(a.max_error > 0) || !std::isfinite(a.max_error)) fail("max-error = {}: must be finite and > 0", a.max_error);
  if (a.inject_failure >= a.ranks) fail("inject-failure = {}: must be a rank in [0, {})", a.inject_failure, a.ranks);
  if (!a.solver.empty() && !a.assignment.empty()) {
    fail("solver = '{}' / assignment = '{}': give one of --solver and --assignment", a.solver, a.assignment);
  }
  prefill::PrefillSpec spec;
  spec.shape = resolve_model_shape(a.model);
  if (a.ranks < 1 || a.ranks > spec.shape.q_heads) {
    fail("ranks = {}: must be in [1, {}] (the model's q heads)", a.ranks, spec.shape.q_heads);
  }
  spec.tokens = a.tokens;
  spec.seed = a.seed;
  // The report gives every head its mask and, through the cost model, every layer's costs for the solvers.
  const heads::HeadPatternReport report = heads::load_head_patterns(a.patterns, spec.shape, a.tokens);
  spec.head_masks = heads::report_masks(report, spec.shape.layers, a.tokens, a.seed);
  std::optional<heads::RuntimeProfile> profile;
  if (!a.profile.empty()) profile = heads::RuntimeProfile::load(a.profile);
  const auto costs =
      heads::model_layer_costs(report, spec.shape, a.tokens, prefill::head_cost_model(spec.shape, profile));
  if (!a.assignment.empty()) {
    job.plans.push_back(heads::price_model(
        a.assignment, prefill::read_assignment_file(a.assignment, spec.shape, a.ranks), costs, a.ranks));
  } else {
    for (const auto& name : solver_names(a.solver.empty() ? "lpt-ls" : a.solver)) {
      job.plans.push_back(heads::solve_model(name, costs, a.ranks, a.seed));
    }
  }
  for (const auto& plan : job.plans) {
    spec.assignment = plan.assignment;
    spec.validate(a.ranks);
    job.specs.push_back(spec);
  }
  if (a.weights.empty()) a.weights = "fulcrum-" + spec.shape.name + ".weights";
  for (std::size_t p = 0; p < job.plans.size(); ++p) {
    for (bool wpr : switches(a.wpr, "wpr")) {
      for (bool cpip : switches(a.cpip, "cpip")) job.configs.push_back({p, wpr, cpip});
    }
  }
  job.info = {spec.shape.name,
              a.patterns,
              a.profile.empty() ? "analytic (FLOPs at H100-class rates: compare ratios, not ms)" : a.profile,
              a.weights,
              a.tokens,
              a.ranks,
              a.max_error};
  return job;
}

// Writes the weights if the file is absent; then checks its header against the model (bad input if not).
void ensure_weights(const PrefillJob& job) {
  if (!std::filesystem::exists(job.args.weights)) {
    prefill::write_random_weights(job.args.weights, job.specs.front().shape, job.args.seed);
    std::fprintf(stderr, "fulcrum: wrote random weights (seed %llu) to %s\n",
                 static_cast<unsigned long long>(job.args.seed), job.args.weights.c_str());
  }
  const prefill::WeightsFile file(job.args.weights, job.specs.front().shape);
}

// Every configuration (solver x WPR x CPIP), `repeats` times, on this rank; rank 0 also checks each against
// the one reference (the masks are the same for every solver). The repeats are interleaved (configuration
// order within each round), so a cold first run or a machine that slows down touches every configuration
// alike.
std::vector<PrefillConfigResult> run_configs(const PrefillJob& job, runtime::Communicator& comm) {
  const std::size_t n = job.configs.size();
  std::vector<std::vector<prefill::PrefillReport>> runs(n);
  std::vector<std::vector<float>> hidden(n);
  for (int i = 0; i < job.args.repeats; ++i) {
    for (std::size_t c = 0; c < n; ++c) {
      const prefill::PrefillSpec& spec = job.specs[job.configs[c].plan];
      prefill::PrefillOptions options;
      options.weights_path = job.args.weights;
      options.wpr = job.configs[c].wpr;
      options.cpip = job.configs[c].cpip;
      options.threads = job.args.threads;
      if (comm.rank() == job.args.inject_failure) options.fail_read_part = 2;
      auto mine = prefill::run_prefill_rank(spec, options, comm);
      runs[c].push_back(prefill::gather_prefill_report(mine, static_cast<long>(spec.tokens), comm));
      hidden[c] = std::move(mine.hidden);
    }
  }
  std::vector<PrefillConfigResult> results;
  std::optional<std::vector<double>> reference;
  for (std::size_t c = 0; c < n; ++c) {
    PrefillConfigResult result;
    result.plan = job.plans[job.configs[c].plan];
    result.wpr = job.configs[c].wpr;
    result.cpip = job.configs[c].cpip;
    result.repeats = job.args.repeats;
    result.report = prefill::median_report(runs[c]);
    if (job.args.check && comm.rank() == 0) {
      if (!reference) reference = prefill::reference_prefill(job.specs.front(), job.args.weights);
      result.max_error = prefill::max_relative_error(hidden[c], *reference);
    }
    results.push_back(std::move(result));
  }
  return results;
}

int report(const PrefillJob& job, const std::vector<PrefillConfigResult>& results) {
  fmt::print("{}", prefill_text(job.info, results));
  if (!job.args.json.empty()) write_output_json("json", job.args.json, prefill_json(job.info, results));
  int code = 0;
  for (const auto& r : results) {
    if (r.max_error && *r.max_error > job.args.max_error) {
      std::fprintf(stderr,
                   "fulcrum: error: prefill (%s, WPR %d, CPIP %d): relative error %.2e exceeds max-error %.1e\n",
                   r.plan.solver.c_str(), r.wpr ? 1 : 0, r.cpip ? 1 : 0, *r.max_error, job.args.max_error);
      code = 1;
    }
  }
  return code;
}

int run_local(const PrefillJob& job) {
  prefill::set_blas_threads(1);  // thread ranks call OpenBLAS concurrently: one thread each
  std::vector<PrefillConfigResult> results;
  std::mutex mutex;
  runtime::run_local_ranks(
      job.args.ranks,
      [&](runtime::Communicator& comm) {
        auto mine = run_configs(job, comm);
        if (comm.rank() == 0) {
          const std::lock_guard lock(mutex);
          results = std::move(mine);
        }
      },
      job.args.timeout_s);
  return report(job, results);
}

int run_mpi(const PrefillJob& job) {
  runtime::MpiSession session;
  auto comm = std::make_unique<runtime::MpiCommunicator>();
  comm->set_timeout_s(job.args.timeout_s);
  std::vector<PrefillConfigResult> results;
  try {
    if (comm->size() != job.args.ranks) {
      fail("ranks = {}: the job was started with {} MPI processes", job.args.ranks, comm->size());
    }
    const int cores = static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));
    prefill::set_blas_threads(job.args.threads > 0 ? job.args.threads : std::max(1, cores / comm->size()));
    if (comm->rank() == 0) ensure_weights(job);  // started by the user's mpiexec: the launcher did not write it
    comm->barrier();
    results = run_configs(job, *comm);
  } catch (const std::exception& e) {
    // One rank's failure ends the whole job with its message instead of leaving the others waiting.
    comm->abort(e.what());
  }
  return comm->rank() == 0 ? report(job, results) : 0;
}

}  // namespace

Action add_prefill_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "prefill", "Prefill a Llama-shaped model on real ranks with per-head masks and a head assignment (WPR, CPIP)");
  auto a = std::make_shared<PrefillArgs>();
  cmd->add_option("--ranks", a->ranks, "ranks (0: every process mpiexec started, else 2)")->capture_default_str();
  cmd->add_option("--backend", a->backend, "mpi (processes; started under mpiexec when needed) | local (threads)")
      ->capture_default_str();
  add_model_option(*cmd, a->model, "the decoder whose layers are prefilled");
  cmd->add_option("--tokens", a->tokens, "prompt tokens")->capture_default_str();
  cmd->add_option("--weights", a->weights,
                  "weights file, written from --seed if absent (default fulcrum-MODEL.weights)");
  cmd->add_option("--seed", a->seed, "seed of the weights (when written) and of the prompt")->capture_default_str();
  cmd->add_option("--wpr", a->wpr, "weight partition and reorganisation: 1, 0, or 0,1 (both, side by side)")
      ->capture_default_str();
  cmd->add_option("--cpip", a->cpip, "background weight prefetch: 1, 0, or 0,1 (both, side by side)")
      ->capture_default_str();
  cmd->add_option("--solver", a->solver,
                  "head solver(s) assigning heads to ranks per layer, comma-separated to run side by side: " +
                      fmt::format("{}", fmt::join(heads::head_solver_names(), ", ")) +
                      " (default lpt-ls; uniform = Megatron's contiguous blocks)");
  cmd->add_option("--assignment", a->assignment, "JSON [layer][q head] -> rank, instead of --solver");
  cmd->add_option("--patterns", a->patterns,
                  "head pattern report (JSON; docs/cli.md) | mixed (full, A-shape, vertical-slash, block-sparse "
                  "cycling over heads) | full")
      ->capture_default_str();
  cmd->add_option("--profile", a->profile,
                  "runtime profile (fulcrum profile --heads) for the solvers' costs; analytic FLOPs without");
  cmd->add_flag("--check", a->check, "compare the final hidden states with the fp64 single-process reference");
  cmd->add_option("--max-error", a->max_error, "--check fails above this relative error")
      ->capture_default_str()
      ->check(in_range(0, 1));  // a relative error past 1 checks nothing
  cmd->add_option("--repeats", a->repeats, "runs of each configuration (times are medians)")->capture_default_str();
  cmd->add_option("--threads", a->threads, "threads per rank for attention and BLAS (0: cores / ranks)")
      ->capture_default_str();
  cmd->add_option("--timeout", a->timeout_s, "watchdog: seconds any rank may wait for another")->capture_default_str();
  add_output_option(*cmd, "json", a->json, "write the results as JSON to this path");
  cmd->add_option("--inject-failure", a->inject_failure, "testing: this rank's read of layer 1's weights fails")
      ->check(in_range(0, std::numeric_limits<int>::max()));  // -1, the default, is not given
  cmd->add_option("--simulate", a->simulate,
                  "simulate on a GPU preset (" + fmt::format("{}", fmt::join(hardware_preset_names(), " | ")) +
                      ") or hardware JSON instead of running ranks (--ranks: devices, default the preset's node)");
  return [a] {
    if (!a->simulate.empty()) {
      if (!a->assignment.empty()) fail("assignment = '{}': not supported with --simulate; use --solver", a->assignment);
      return run_prefill_simulation({a->simulate, a->ranks, a->model, a->patterns, a->profile, a->solver, a->wpr,
                                     a->cpip, a->tokens, a->seed, a->json});
    }
    const PrefillJob job = make_job(*a);
    if (!job.args.json.empty()) check_output_file("json", job.args.json);
    if (job.args.backend == "local") {
      ensure_weights(job);
      return run_local(job);
    }
    if (!started_by_mpiexec()) {
      ensure_weights(job);
      return relaunch_under_mpiexec(job.args.ranks);
    }
    return run_mpi(job);
  };
}

}  // namespace fulcrum::cli
