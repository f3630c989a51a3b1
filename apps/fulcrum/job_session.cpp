#include "job_session.hpp"

#include "commands.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/core/text.hpp"
#include "fulcrum/report/chrome_trace.hpp"
#include "fulcrum/report/run_report.hpp"
#include "fulcrum/report/sim_validation_report.hpp"
#include "fulcrum/runtime/local_communicator.hpp"
#include "fulcrum/runtime/mpi_communicator.hpp"
#include "outputs.hpp"
#include "verbosity.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string_view>
#include <thread>

namespace fulcrum::cli {
namespace {

struct Injection {
  int rank = -1;
  bool hang = false;
};

Injection parse_injection(const std::string& text, int ranks) {
  Injection out;
  if (text.empty()) return out;
  const auto colon = text.find(':');
  const std::string what = colon == std::string::npos ? "" : text.substr(colon + 1);
  // The whole RANK in decimal: std::stoi read "0x1" as 0 and injected on the wrong rank.
  out.rank = parse_whole<int>(std::string_view(text).substr(0, colon)).value_or(-1);
  if (out.rank < 0 || out.rank >= ranks || (what != "throw" && what != "hang")) {
    fail("inject-failure = '{}': must be RANK:throw or RANK:hang with RANK in [0, {})", text, ranks);
  }
  out.hang = what == "hang";
  return out;
}

std::vector<studies::JobResult> run_jobs(const SessionOptions& options, const std::vector<studies::JobConfig>& jobs,
                                         runtime::Communicator& comm) {
  const Injection injection = parse_injection(options.inject_failure, comm.size());
  std::vector<studies::JobResult> results;
  for (const auto& job : jobs) {
    if (comm.rank() == 0) {
      show_progress(fmt::format("run: job {}/{}: {} / {} on {} ranks (plan, forward, backward, check)",
                                results.size() + 1, jobs.size(), job.planner, to_string(job.mode), comm.size()),
                    false);
    }
    if (comm.rank() == injection.rank) {
      if (!injection.hang) fail_runtime("injected failure (--inject-failure {})", options.inject_failure);
      std::this_thread::sleep_for(std::chrono::duration<double>(2 * options.timeout_s));
      fail_runtime("injected hang ended after {} s", 2 * options.timeout_s);
    }
    results.push_back(studies::run_attention_job(job, comm));
  }
  if (comm.rank() == 0) show_progress(fmt::format("run: {} jobs done", jobs.size()), true);
  return results;
}

// Every job's events in one trace: job j's rank r is process j * ranks + r.
void write_trace(const std::vector<studies::JobResult>& results, std::string_view option, const std::string& path) {
  runtime::Timeline all;
  std::vector<std::string> names;
  for (std::size_t j = 0; j < results.size(); ++j) {
    const auto& job = results[j];
    for (int r = 0; r < job.ranks; ++r)
      names.push_back(fmt::format("{} / {}: rank {}", job.config.planner, mode_name(job.config), r));
    for (auto e : job.timeline.events) {
      e.rank += static_cast<int>(j) * job.ranks;
      all.events.push_back(e);
    }
  }
  write_output(option, path, chrome_trace(all, names).dump() + "\n");
}

int report(const SessionOptions& options, const std::vector<studies::JobResult>& results, bool print) {
  std::string text;
  for (const auto& job : results) text += run_rank_table(job) + "\n";
  text += run_comparison_table(results);
  text += "\nbalance over ranks and steps (max/mean; sync: sum over steps of the slowest rank / of the mean)\n" +
          step_balance_table(results);
  int code = 0;
  std::string problems;
  for (const auto& job : results) {
    if (job.max_error() > options.max_error) {
      problems += fmt::format("fulcrum: error: {} / {}: relative error {:.2e} exceeds max-error {:.1e}\n",
                              job.config.planner, mode_name(job.config), job.max_error(), options.max_error);
      code = 1;
    }
  }
  if (!print) return code;
  fmt::print("{}", text);
  std::fprintf(stderr, "%s", problems.c_str());
  std::string json = options.json, trace = options.trace, svg = options.svg;
  // demo's report folder holds every output; its files' errors name --out.
  const bool folder = !options.report_dir.empty();
  if (folder) {
    json = options.report_dir + "/report.json";
    trace = options.report_dir + "/trace.json";
    svg = options.report_dir + "/attention_per_rank.svg";
    write_output("out", options.report_dir + "/summary.txt", text);
  }
  if (!json.empty()) write_output_json(folder ? "out" : "json", json, run_json(results));
  if (!trace.empty()) write_trace(results, folder ? "out" : "trace", trace);
  if (!svg.empty()) write_output(folder ? "out" : "svg", svg, bar_chart_svg(attention_chart(results)));
  if (!options.simulate.empty()) {
    const HardwareModel hardware = load_hardware(options.simulate);
    std::vector<studies::SimValidation> rows;
    for (const auto& job : results) rows.push_back(studies::validate_with_simulator(job, hardware));
    fmt::print("\nsimulated on {} against measured:\n{}", hardware.name, validation_table(rows));
    if (folder) write_output_json("out", options.report_dir + "/simulated.json", validation_json(rows));
  }
  if (!options.report_dir.empty()) fmt::print("report written to {}/\n", options.report_dir);
  return code;
}

int run_mpi(const SessionOptions& options, const std::vector<studies::JobConfig>& jobs) {
  runtime::MpiSession session;
  auto comm = std::make_unique<runtime::MpiCommunicator>(options.progress == "none" ? runtime::MpiProgress::kNone
                                                                                    : runtime::MpiProgress::kThread);
  comm->set_timeout_s(options.timeout_s);
  std::vector<studies::JobResult> results;
  try {
    if (comm->size() != options.ranks) {
      fail("ranks = {}: the job was started with {} MPI processes", options.ranks, comm->size());
    }
    results = run_jobs(options, jobs, *comm);
  } catch (const std::exception& e) {
    // One rank's failure ends the whole job with its message (printed by abort), instead of leaving
    // the others waiting.
    comm->abort(e.what());
  }
  return report(options, results, comm->rank() == 0);
}

int run_local(const SessionOptions& options, const std::vector<studies::JobConfig>& jobs) {
  std::vector<studies::JobResult> results;
  std::mutex mutex;
  runtime::run_local_ranks(
      options.ranks,
      [&](runtime::Communicator& comm) {
        auto mine = run_jobs(options, jobs, comm);
        if (comm.rank() == 0) {
          std::lock_guard lock(mutex);
          results = std::move(mine);
        }
      },
      options.timeout_s);
  return report(options, results, true);
}

}  // namespace

void SessionOptions::add_to(CLI::App& cmd) {
  cmd.add_option("--ranks", ranks, "ranks (0: every process mpiexec started, else 4)")->capture_default_str();
  cmd.add_option("--backend", backend, "mpi (processes; started under mpiexec when needed) | local (threads)")
      ->capture_default_str();
  cmd.add_option("--progress", progress, "MPI progress: thread (a progress thread) | none (only inside waits)")
      ->capture_default_str();
  cmd.add_option("--timeout", timeout_s, "watchdog: seconds any rank may wait for another")->capture_default_str();
  cmd.add_option("--max-error", max_error, "fail when a relative error exceeds this")
      ->capture_default_str()
      ->check(in_range(0, 1));  // a relative error past 1 checks nothing
  cmd.add_option("--inject-failure", inject_failure, "testing: RANK:throw or RANK:hang");
  cmd.add_option("--simulate", simulate, "replay the plans on this hardware (preset or JSON) and compare");
  add_output_option(cmd, "json", json, "write the results as JSON to this path");
  add_output_option(cmd, "trace", trace, "write a Chrome trace (one track per rank and stream) to this path");
  add_output_option(cmd, "svg", svg, "write the per-rank attention-time chart to this path");
}

int run_job_session(const SessionOptions& requested, const std::vector<studies::JobConfig>& jobs) {
  SessionOptions options = requested;
  if (options.ranks == 0) {  // every process mpiexec started, or 4 local ranks
    const char* world = std::getenv("OMPI_COMM_WORLD_SIZE");
    options.ranks = started_by_mpiexec() && world ? std::atoi(world) : 4;
  }
  if (options.ranks < 1 || options.ranks > 1024) fail("ranks = {}: must be in [1, 1024]", options.ranks);
  if (options.backend != "mpi" && options.backend != "local")
    fail("backend = '{}': must be mpi or local", options.backend);
  if (options.progress != "thread" && options.progress != "none") {
    fail("progress = '{}': must be thread or none", options.progress);
  }
  if (!(options.timeout_s > 0 && options.timeout_s <= 86400))
    fail("timeout = {}: must be in (0, 86400] s", options.timeout_s);
  if (!(options.max_error > 0) || !std::isfinite(options.max_error)) {
    fail("max-error = {}: must be finite and > 0", options.max_error);
  }
  parse_injection(options.inject_failure, options.ranks);
  if (!options.simulate.empty()) load_hardware(options.simulate);  // a bad name fails before any rank starts
  for (const auto& job : jobs) job.validate(options.ranks);        // bad input fails here, before any rank starts
  // Outputs too, so a path that cannot be written fails now rather than after the job.
  if (!options.report_dir.empty()) check_output_folder("out", options.report_dir);
  for (const auto& [option, path] :
       {std::pair{"json", options.json}, std::pair{"trace", options.trace}, std::pair{"svg", options.svg}}) {
    if (!path.empty()) check_output_file(option, path);
  }
  for (const auto& job : jobs) {
    if (!job.save_plans.empty()) check_output_folder("save-plans", job.save_plans);
  }
  if (options.backend == "local") return run_local(options, jobs);
  if (!started_by_mpiexec()) return relaunch_under_mpiexec(options.ranks);
  return run_mpi(options, jobs);
}

}  // namespace fulcrum::cli
