// The part `fulcrum run` and `fulcrum demo` share: start the ranks (re-launching this binary under
// mpiexec when it was not started by it, or threads with --backend local), run a list of attention
// jobs on every rank, bring the whole job down with the failing rank's message if one fails, and
// write what rank 0 reports.
#pragma once

#include "fulcrum/studies/attention_job.hpp"
#include "mpi_launcher.hpp"

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace fulcrum::cli {

struct SessionOptions {
  int ranks = 0;                    // 0: every process mpiexec started, or 4
  std::string backend = "mpi";      // mpi | local
  std::string progress = "thread";  // MPI progress: a dedicated thread, or only inside waits (none)
  double timeout_s = 120;           // the watchdog: the longest any rank waits for another
  double max_error = 1e-5;          // exit 1 when a checked relative error exceeds it
  std::string inject_failure;       // testing hook: "RANK:throw" or "RANK:hang"
  std::string json, trace, svg;     // outputs written by rank 0
  std::string report_dir;           // demo: all outputs in one folder
  std::string simulate;             // a hardware preset or calibration file: replay the plans, compare

  void add_to(CLI::App& cmd);
};

/// Runs `jobs` in order on every rank and reports; returns the process exit code.
int run_job_session(const SessionOptions& options, const std::vector<studies::JobConfig>& jobs);

}  // namespace fulcrum::cli
