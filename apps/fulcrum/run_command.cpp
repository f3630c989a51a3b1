// `fulcrum run`: core attention forward and backward on real ranks, planned by any planner, in any of
// the communication modes, checked against a single-process reference.
#include "commands.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/core/text.hpp"
#include "fulcrum/workload/mask.hpp"
#include "job_session.hpp"
#include "mpi_launcher.hpp"
#include "outputs.hpp"
#include "verbosity.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include <memory>

namespace fulcrum::cli {
namespace {

void add_job_options(CLI::App& cmd, studies::JobConfig& job) {
  cmd.add_option("--dataset", job.dataset, "pretrain | prolong | uniform:MIN:MAX | lognormal:MU:SIGMA | file:PATH")
      ->capture_default_str();
  add_model_option(cmd, job.model, "its heads and head dim size the Q/K/V tensors the ranks compute on");
  cmd.add_option("--mask", job.mask, mask_syntax_list(" | "))->capture_default_str();
  cmd.add_option("--tokens-per-rank", job.tokens_per_rank, "tokens each rank holds after packing")
      ->capture_default_str();
  cmd.add_option("--seed", job.seed, "seed of the lengths and of the Q/K/V/dO values")->capture_default_str();
  add_planner_flags(cmd, job.options);
  add_topology_flags(cmd, job.options);
  add_boundary_split_option(cmd, job.boundary_split);
  cmd.add_option_function<std::string>(
         "--reference", [&job](const std::string& text) { job.reference = runtime::parse_reference(text); },
         "kernel (fused fp32, one process) | fp64 (materialised) | none")
      ->type_name("TEXT")
      ->default_str(runtime::to_string(job.reference));
  cmd.add_option("--repeats", job.repeats, "timed runs of each pass (times are medians)")->capture_default_str();
  cmd.add_option("--threads", job.threads, "kernel threads per rank (0: cores / ranks)")->capture_default_str();
  cmd.add_flag("--deterministic", job.deterministic,
               "backward sums dK/dV in task order: gradients bitwise repeatable whatever the thread count");
  add_output_option(cmd, "save-plans", job.save_plans, "write the compiled plans to this folder");
  cmd.add_option("--plan-format", job.plan_format, "of --save-plans' files: fcpl (binary) | json")
      ->capture_default_str();
}

/// A --save-plans folder named like a JSON file chose JSON plans before --plan-format; it still does, for
/// one release, with a warning (printed once, by the process the user started).
void resolve_plan_format(CLI::App& cmd, studies::JobConfig& job) {
  if (!job.save_plans.ends_with(".json") || cmd.get_option("--plan-format")->count() > 0) return;
  job.plan_format = "json";
  if (!started_by_mpiexec()) {
    warn(
        fmt::format("save-plans = '{}' is a folder; JSON plans from its name are deprecated and go in the next "
                    "release: write --plan-format json",
                    job.save_plans));
  }
}

/// Jobs for every (planner, mode) pair; mode `signal` is the pingpong plan with 1-byte messages.
std::vector<studies::JobConfig> jobs_for(const studies::JobConfig& base, const std::string& planners,
                                         const std::string& modes) {
  std::vector<studies::JobConfig> jobs;
  for (const auto& planner : split_names(planners, "planners")) {
    for (const auto& mode : split_names(modes, "modes")) {
      studies::JobConfig job = base;
      job.planner = planner;
      job.mode = parse_comm_mode(mode, "modes");
      jobs.push_back(job);
    }
  }
  if (jobs.empty()) fail("planners and modes: name at least one of each");
  return jobs;
}

}  // namespace

Action add_run_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("run", "Run core attention forward and backward on real ranks and verify it");
  auto job = std::make_shared<studies::JobConfig>();
  auto session = std::make_shared<SessionOptions>();
  auto planners = std::make_shared<std::string>("distca");
  auto modes = std::make_shared<std::string>("pingpong");
  auto candidates = std::make_shared<std::string>();
  cmd->add_option("--planners", *planners, "comma-separated: " + planner_list())->capture_default_str();
  cmd->add_option("--modes", *modes, "comma-separated: pingpong, single-stream, signal")->capture_default_str();
  add_auto_options(*cmd, *candidates, &job->hardware);
  add_job_options(*cmd, *job);
  session->add_to(*cmd);
  return [cmd, job, session, planners, modes, candidates] {
    resolve_plan_format(*cmd, *job);
    warn_unread_planner_flags(*cmd, split_names(*planners, "planners"));
    job->candidates = auto_candidates(*planners, *candidates);
    return run_job_session(*session, jobs_for(*job, *planners, *modes));
  };
}

Action add_demo_command(CLI::App& app) {
  auto* cmd =
      app.add_subcommand("demo", "The main job: DistCA and the baselines on 4 local ranks, verified, with a report");
  auto job = std::make_shared<studies::JobConfig>();
  auto session = std::make_shared<SessionOptions>();
  session->report_dir = "fulcrum-demo";
  job->dataset = "pretrain";
  // 4 ranks x 4096 tokens of `pretrain`; seed 36 draws a batch whose packed form is 2.1x imbalanced.
  job->tokens_per_rank = 4096;
  job->seed = 36;
  job->options.set("tolerance", 0.05);  // DistCA within 5% of the mean, the setting docs/performance.md measures
  add_output_option(*cmd, "out", session->report_dir, "report folder (JSON, Chrome trace, SVG, summary)")
      ->capture_default_str();
  add_job_options(*cmd, *job);
  session->add_to(*cmd);
  return [cmd, job, session] {
    resolve_plan_format(*cmd, *job);
    // DistCA in its three communication modes, then the baselines through the same executor.
    const std::string baselines = "packed,perdoc-cp";
    warn_unread_planner_flags(*cmd, split_names("distca," + baselines, "planners"));
    auto jobs = jobs_for(*job, "distca", "pingpong,single-stream,signal");
    for (auto& j : jobs_for(*job, baselines, "pingpong")) jobs.push_back(j);
    return run_job_session(*session, jobs);
  };
}

}  // namespace fulcrum::cli
