#include "fulcrum/runtime/launcher_stderr.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <csignal>
#include <utility>

namespace fulcrum::runtime {
namespace {

// Lower is more telling. A signal is the cause of everything else; a rank's own error comes before the
// timeouts it caused in the others; of those, one that names the rank it waited for comes first.
constexpr int kKilledBySignal = 0;
constexpr int kRankError = 1;
constexpr int kTimeoutNamingRank = 2;
constexpr int kTimeout = 3;
constexpr int kMpiAbort = 4;

// Open MPI frames each help message between two lines of dashes.
bool is_banner_rule(std::string_view text) {
  return text.size() >= 20 && text.find_first_not_of('-') == std::string_view::npos;
}

// The few line shapes below are matched by hand: a std::regex costs more than the lines it reads, and
// GCC 12 warns inside <regex> (-Wmaybe-uninitialized) in the sanitizer build.
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Reads a literal, a run of digits or a run of non-blanks from the front of `rest`, advancing past it.
bool take(std::string_view& rest, std::string_view literal) {
  if (!rest.starts_with(literal)) return false;
  rest.remove_prefix(literal.size());
  return true;
}
bool take_run(std::string_view& rest, std::string_view& run, bool digits) {
  std::size_t n = 0;
  while (n < rest.size() && (digits ? is_digit(rest[n]) : rest[n] != ' ' && rest[n] != '\t')) ++n;
  if (n == 0) return false;
  run = rest.substr(0, n);
  rest.remove_prefix(n);
  return true;
}

// Whether `pattern`, tried at every occurrence of its first literal `head` in `text`, matches there.
template <class Pattern>
bool search(std::string_view text, std::string_view head, Pattern pattern) {
  for (auto at = text.find(head); at != std::string_view::npos; at = text.find(head, at + 1)) {
    std::string_view rest = text.substr(at + head.size());
    if (pattern(rest)) return true;
  }
  return false;
}

// "[host:pid] ...": Open MPI's own diagnostics (ORTE_ERROR_LOG, "*** Process received signal ***" and its
// backtrace), from mpiexec or a rank's MPI library; never a line of Fulcrum's.
bool is_open_mpi_diagnostic(std::string_view text) {
  const auto close = text.find(']');
  if (!text.starts_with('[') || close == std::string_view::npos || text.substr(close + 1, 1) != " ") return false;
  const std::string_view inside = text.substr(1, close - 1);
  const auto colon = inside.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == inside.size()) return false;
  if (inside.find_first_of(" \t") != std::string_view::npos) return false;
  const std::string_view pid = inside.substr(colon + 1);
  return std::all_of(pid.begin(), pid.end(), is_digit);
}

std::string trimmed(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(" \t\r");
  return std::string(text.substr(first, last - first + 1));
}

}  // namespace

std::string signal_name(int signal) {
  static constexpr std::array<std::pair<int, const char*>, 16> kNames = {{{SIGHUP, "SIGHUP"},
                                                                          {SIGINT, "SIGINT"},
                                                                          {SIGQUIT, "SIGQUIT"},
                                                                          {SIGILL, "SIGILL"},
                                                                          {SIGTRAP, "SIGTRAP"},
                                                                          {SIGABRT, "SIGABRT"},
                                                                          {SIGBUS, "SIGBUS"},
                                                                          {SIGFPE, "SIGFPE"},
                                                                          {SIGKILL, "SIGKILL"},
                                                                          {SIGUSR1, "SIGUSR1"},
                                                                          {SIGSEGV, "SIGSEGV"},
                                                                          {SIGUSR2, "SIGUSR2"},
                                                                          {SIGPIPE, "SIGPIPE"},
                                                                          {SIGALRM, "SIGALRM"},
                                                                          {SIGTERM, "SIGTERM"},
                                                                          {SIGXCPU, "SIGXCPU"}}};
  for (const auto& [number, name] : kNames) {
    if (number == signal) return name;
  }
  return fmt::format("signal {}", signal);
}

void LauncherStderr::banner_line(std::string_view text) {
  // "process rank R with PID P on node N exited on signal S", "MPI_ABORT was invoked on rank R".
  std::string_view rank, pid, node, signal;
  const bool signalled = search(text, "process rank ", [&](std::string_view rest) {
    return take_run(rest, rank, true) && take(rest, " with PID ") && take_run(rest, pid, true) &&
           take(rest, " on node ") && take_run(rest, node, false) && take(rest, " exited on signal ") &&
           take_run(rest, signal, true);
  });
  if (signalled) {
    const int number = std::stoi(std::string(signal));
    candidates_.push_back({kKilledBySignal, fmt::format("fulcrum: rank {}: error: killed by signal {} ({}) on node {}",
                                                        rank, number, signal_name(number), node)});
  } else if (search(text, "MPI_ABORT was invoked on rank ",
                    [&](std::string_view rest) { return take_run(rest, rank, true); })) {
    candidates_.push_back({kMpiAbort, fmt::format("fulcrum: rank {}: error: called MPI_Abort", rank)});
  }
  const std::string words = trimmed(text);
  if (banner_blank_seen_) return;
  if (words.empty()) {
    banner_blank_seen_ = !first_banner_.empty();
  } else {
    first_banner_ += (first_banner_.empty() ? "" : " ") + words;
  }
}

std::optional<std::string> LauncherStderr::line(std::string_view text) {
  if (is_banner_rule(text)) {
    in_banner_ = !in_banner_;
    if (!in_banner_ && !first_banner_.empty()) banner_blank_seen_ = true;  // only the first banner's words
    return std::nullopt;
  }
  if (in_banner_) {
    banner_line(text);
    return std::nullopt;
  }
  if (is_open_mpi_diagnostic(text)) return std::nullopt;
  std::string_view rest = text, number;
  if (take(rest, "fulcrum: rank ") && take_run(rest, number, true) && take(rest, ": error: ")) {
    // Held until the job has ended: the ranks the failure stopped report too, and only one line is the cause.
    // A timeout that names the rank it waited for: "receive from rank R", "send to rank R", "rank R never arrived".
    const auto rank_follows = [&](std::string_view after) { return take_run(after, number, true); };
    const bool names_rank =
        search(text, "receive from rank ", rank_follows) || search(text, "send to rank ", rank_follows) ||
        search(text, "rank ",
               [&](std::string_view after) { return take_run(after, number, true) && take(after, " never arrived"); });
    int priority = kRankError;
    if (text.find(": timed out after ") != std::string_view::npos)
      priority = names_rank ? kTimeoutNamingRank : kTimeout;
    candidates_.push_back({priority, std::string(text)});
    return std::nullopt;
  }
  if (text.starts_with("fulcrum: ")) {  // every rank may say the same thing: once is enough
    if (std::find(passed_.begin(), passed_.end(), text) != passed_.end()) return std::nullopt;
    passed_.emplace_back(text);
  }
  return std::string(text);
}

std::optional<std::string> LauncherStderr::finish(int exit_code, int signal) const {
  const auto best = std::min_element(candidates_.begin(), candidates_.end(),
                                     [](const Candidate& a, const Candidate& b) { return a.priority < b.priority; });
  if (best != candidates_.end()) return best->text;
  if (signal != 0)
    return fmt::format("fulcrum: error: mpiexec was killed by signal {} ({})", signal, signal_name(signal));
  const bool explained = std::any_of(passed_.begin(), passed_.end(),
                                     [](const std::string& p) { return p.starts_with("fulcrum: error: "); });
  if (exit_code == 0 || explained) return std::nullopt;
  return fmt::format("fulcrum: error: mpiexec exited with code {}{}{} (FULCRUM_MPI_VERBOSE=1 shows its full report)",
                     exit_code, first_banner_.empty() ? "" : ": ", first_banner_);
}

}  // namespace fulcrum::runtime
