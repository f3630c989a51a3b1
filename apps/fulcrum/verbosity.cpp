#include "verbosity.hpp"

#include "fulcrum/core/error.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace fulcrum::cli {
namespace {

int& quiet_count() {
  static int count = 0;
  return count;
}

int& verbose_count() {
  static int count = 0;
  return count;
}

void add_flags(CLI::App& app) {
  app.add_flag("-q,--quiet", quiet_count(), "say nothing but results and errors (no progress, no warnings)");
  app.add_flag("-v,--verbose", verbose_count(),
               "progress even when stderr is not a terminal, and mpiexec's own stderr unfiltered");
}

}  // namespace

void add_verbosity_flags(CLI::App& app) {
  add_flags(app);
  for (CLI::App* sub : app.get_subcommands({})) add_verbosity_flags(*sub);
}

void check_verbosity() {
  if (quiet_count() > 0 && verbose_count() > 0) fail("quiet / verbose: give at most one of -q and -v");
}

Verbosity verbosity() {
  if (quiet_count() > 0) return Verbosity::kQuiet;
  return verbose_count() > 0 ? Verbosity::kVerbose : Verbosity::kNormal;
}

bool progress_wanted() {
  switch (verbosity()) {
    case Verbosity::kQuiet: return false;
    case Verbosity::kVerbose: return true;
    case Verbosity::kNormal: break;
  }
  // A rank under the launcher writes into mpiexec's pipe; the launcher says whether the user's stderr is a
  // terminal (mpi_launcher.cpp).
  if (const char* terminal = std::getenv(kStderrIsTerminal); terminal != nullptr)
    return std::string_view(terminal) == "1";
  return isatty(STDERR_FILENO) != 0;
}

void show_progress(std::string_view text, bool last) {
  if (!progress_wanted()) return;
  if (isatty(STDERR_FILENO) != 0) {
    fmt::print(stderr, "\r{}{}", text, last ? "\n" : "");
  } else {
    fmt::print(stderr, "{}\n", text);
  }
  std::fflush(stderr);
}

void warn(std::string_view message) {
  if (verbosity() == Verbosity::kQuiet) return;
  fmt::print(stderr, "fulcrum: warning: {}\n", message);
  std::fflush(stderr);
}

}  // namespace fulcrum::cli
