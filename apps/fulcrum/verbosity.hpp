// How much the CLI says besides its results: -q (errors only) and -v (progress even off a terminal, and
// mpiexec's own stderr unfiltered). Results (tables, files) and errors are the same at every level.
#pragma once

#include <CLI/CLI.hpp>

#include <string_view>

namespace fulcrum::cli {

enum class Verbosity { kQuiet, kNormal, kVerbose };

/// -q/--quiet and -v/--verbose on `app` and every subcommand, so they go before or after the subcommand.
/// Call after adding the subcommands.
void add_verbosity_flags(CLI::App& app);
/// After parsing: both given is bad input.
void check_verbosity();
Verbosity verbosity();

/// Set by the launcher for the ranks it starts: "1" when its own stderr is a terminal.
inline constexpr const char* kStderrIsTerminal = "FULCRUM_STDERR_IS_TERMINAL";

/// Progress lines go to stderr: on a terminal unless -q, anywhere with -v.
bool progress_wanted();
/// A progress line: on a terminal redrawn in place ("\r", a newline after the last); elsewhere (-v) one
/// line each. Nothing unless progress_wanted().
void show_progress(std::string_view text, bool last);
/// "fulcrum: warning: MESSAGE" on stderr unless -q.
void warn(std::string_view message);

}  // namespace fulcrum::cli
