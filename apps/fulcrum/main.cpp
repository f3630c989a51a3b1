// The `fulcrum` command line: subcommands, and the mapping of errors to exit codes
// (0 success, 2 bad input, 1 runtime failure) with a one-line message on stderr.
#include "commands.hpp"
#include "job_session.hpp"
#include "mpi_launcher.hpp"

#include "fulcrum/core/error.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <exception>
#include <vector>

int main(int argc, char** argv) {
  fulcrum::cli::tie_rank_to_launcher();  // before anything else: a rank must not outlive its mpiexec
  CLI::App app{"Fulcrum: balancing core-attention work across ranks for long-context training"};
  app.require_subcommand(1);
  std::vector<std::pair<CLI::App*, fulcrum::cli::Action>> commands;
  auto plan = fulcrum::cli::add_plan_command(app);
  commands.emplace_back(app.get_subcommand("plan"), plan);
  auto bench = fulcrum::cli::add_bench_command(app);
  commands.emplace_back(app.get_subcommand("bench")->get_subcommand("kernels"), bench);
  auto bench_comm = fulcrum::cli::add_bench_comm_command(app);
  commands.emplace_back(app.get_subcommand("bench")->get_subcommand("comm"), bench_comm);
  auto profile = fulcrum::cli::add_profile_command(app);
  commands.emplace_back(app.get_subcommand("profile"), profile);
  auto run = fulcrum::cli::add_run_command(app);
  commands.emplace_back(app.get_subcommand("run"), run);
  auto demo = fulcrum::cli::add_demo_command(app);
  commands.emplace_back(app.get_subcommand("demo"), demo);
  auto simulate = fulcrum::cli::add_simulate_command(app);
  commands.emplace_back(app.get_subcommand("simulate"), simulate);
  auto heads = fulcrum::cli::add_heads_command(app);
  commands.emplace_back(app.get_subcommand("heads"), heads);
  auto prefill = fulcrum::cli::add_prefill_command(app);
  commands.emplace_back(app.get_subcommand("prefill"), prefill);
  fulcrum::cli::reject_out_of_range_integers(app);
  fulcrum::cli::set_command_line(argc, argv);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "fulcrum: error: %s\n", e.what());
    return 2;
  } catch (const fulcrum::Error& e) {  // a flag's value out of its declared range
    std::fprintf(stderr, "fulcrum: error: %s\n", e.what());
    return e.kind() == fulcrum::ErrorKind::kBadInput ? 2 : 1;
  }
  try {
    for (auto& [sub, action] : commands) {
      if (sub->parsed()) return action();
    }
    return 2;
  } catch (const fulcrum::Error& e) {
    std::fprintf(stderr, "fulcrum: error: %s\n", e.what());
    return e.kind() == fulcrum::ErrorKind::kBadInput ? 2 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fulcrum: error: %s\n", e.what());
    return 1;
  }
}
