// The `fulcrum` command line: subcommands, and the mapping of errors to exit codes
// (0 success, 2 bad input, 1 runtime failure) with a one-line message on stderr.
#include "commands.hpp"
#include "job_session.hpp"
#include "mpi_launcher.hpp"
#include "option_aliases.hpp"
#include "verbosity.hpp"

#include "fulcrum/core/error.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <optional>
#include <vector>

namespace {

// A subcommand, its action, and the options that size its work (named when memory runs out).
struct Command {
  CLI::App* sub;
  fulcrum::cli::Action action;
  const char* sized_by;
};

std::vector<Command> add_commands(CLI::App& app) {
  std::vector<Command> commands;
  auto plan = fulcrum::cli::add_plan_command(app);
  commands.push_back({app.get_subcommand("plan"), plan, "ranks x tokens-per-rank, or a planner's block size"});
  auto bench = fulcrum::cli::add_bench_command(app);
  commands.push_back({app.get_subcommand("bench")->get_subcommand("kernels"), bench,
                      "lengths, split-length, q-heads, kv-heads or head-dim"});
  auto bench_comm = fulcrum::cli::add_bench_comm_command(app);
  commands.push_back({app.get_subcommand("bench")->get_subcommand("comm"), bench_comm, "sizes"});
  auto profile = fulcrum::cli::add_profile_command(app);
  commands.push_back({app.get_subcommand("profile"), profile, "query-lengths, key-lengths or the head shape"});
  auto run = fulcrum::cli::add_run_command(app);
  commands.push_back({app.get_subcommand("run"), run, "ranks x tokens-per-rank"});
  auto demo = fulcrum::cli::add_demo_command(app);
  commands.push_back({app.get_subcommand("demo"), demo, "ranks x tokens-per-rank"});
  auto simulate = fulcrum::cli::add_simulate_command(app);
  commands.push_back({app.get_subcommand("simulate"), simulate, "gpus, max-doc-len or tokens-per-rank"});
  auto heads = fulcrum::cli::add_heads_command(app);
  commands.push_back({app.get_subcommand("heads"), heads, "tokens or devices"});
  auto prefill = fulcrum::cli::add_prefill_command(app);
  commands.push_back({app.get_subcommand("prefill"), prefill, "model, tokens or ranks"});
  auto models = fulcrum::cli::add_models_command(app);
  commands.push_back({app.get_subcommand("models"), models, "files"});
  return commands;
}

// Parses the command line and checks the flags that need no subcommand. An exit code where that ends
// the process (help, version, a parse error), nothing where the chosen subcommand is to run.
std::optional<int> parse(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string message = fulcrum::cli::unknown_subcommand_message(app, argc, argv);
    if (message.empty() && dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
      message = fulcrum::cli::unknown_option_message(app, argc, argv);
    }
    std::fprintf(stderr, "fulcrum: error: %s\n", message.empty() ? e.what() : message.c_str());
    return 2;
  } catch (const fulcrum::Error& e) {  // a flag's value out of its declared range
    std::fprintf(stderr, "fulcrum: error: %s\n", e.what());
    return e.kind() == fulcrum::ErrorKind::kBadInput ? 2 : 1;
  }
  try {
    fulcrum::cli::check_verbosity();
    fulcrum::cli::check_deprecated_options();
  } catch (const fulcrum::Error& e) {
    std::fprintf(stderr, "fulcrum: error: %s\n", e.what());
    return 2;
  }
  return std::nullopt;
}

// Runs the parsed subcommand, its errors mapped to exit codes with a one-line message.
int run_parsed(const std::vector<Command>& commands) {
  const char* sized_by = "";
  try {
    for (const auto& command : commands) {
      if (!command.sub->parsed()) continue;
      sized_by = command.sized_by;
      return command.action();
    }
    return 2;
  } catch (const std::bad_alloc&) {
    // Options with a cost are bounded or estimated up front; what still does not fit is too large an input.
    std::fprintf(stderr, "fulcrum: error: %s: too large, out of memory while sizing the work\n", sized_by);
    return 2;
  } catch (const fulcrum::Error& e) {
    std::fprintf(stderr, "fulcrum: error: %s\n", e.what());
    return e.kind() == fulcrum::ErrorKind::kBadInput ? 2 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fulcrum: error: %s\n", e.what());
    return 1;
  }
}

// stdout is buffered, so a full disk or a closed pipe shows only when it is flushed: the tables a command
// printed must have reached their reader for the run to succeed (`fulcrum plan > /dev/full` exited 0).
int finish_stdout(int code) {
  errno = 0;
  if (std::fflush(stdout) == 0 && std::ferror(stdout) == 0) return code;
  std::fprintf(stderr, "fulcrum: error: standard output: write failed (%s)\n",
               errno != 0 ? std::strerror(errno) : "an earlier write failed");
  return code == 0 ? 1 : code;
}

}  // namespace

int main(int argc, char** argv) {
  fulcrum::cli::tie_rank_to_launcher();  // before anything else: a rank must not outlive its mpiexec
  CLI::App app{"Fulcrum: balancing core-attention work across ranks for long-context training"};
  app.require_subcommand(1);
  const std::vector<Command> commands = add_commands(app);
  app.set_version_flag("--version", fulcrum::cli::version_text,
                       "Print the version, git revision, build type, compiler and kernel ISA, then exit");
  fulcrum::cli::add_verbosity_flags(app);
  fulcrum::cli::reject_bad_numbers(app);
  fulcrum::cli::set_command_line(argc, argv);
  if (const auto exit_code = parse(app, argc, argv)) return *exit_code;
  const int code = run_parsed(commands);
  return finish_stdout(code);
}
