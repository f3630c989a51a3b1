#include "fulcrum/runtime/launcher_stderr.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <csignal>
#include <regex>
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

// "[host:pid] ...": Open MPI's own diagnostics (ORTE_ERROR_LOG, "*** Process received signal ***" and its
// backtrace), from mpiexec or a rank's MPI library; never a line of Fulcrum's.
bool is_open_mpi_diagnostic(std::string_view text) {
  static const std::regex pattern(R"(^\[[^\]\s]+:\d+\] )");
  return std::regex_search(text.begin(), text.end(), pattern);
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
  static const std::regex signalled(R"(process rank (\d+) with PID \d+ on node (\S+) exited on signal (\d+))");
  static const std::regex aborted(R"(MPI_ABORT was invoked on rank (\d+))");
  std::match_results<std::string_view::const_iterator> m;
  if (std::regex_search(text.begin(), text.end(), m, signalled)) {
    const int signal = std::stoi(m[3].str());
    candidates_.push_back({kKilledBySignal, fmt::format("fulcrum: rank {}: error: killed by signal {} ({}) on node {}",
                                                        m[1].str(), signal, signal_name(signal), m[2].str())});
  } else if (std::regex_search(text.begin(), text.end(), m, aborted)) {
    candidates_.push_back({kMpiAbort, fmt::format("fulcrum: rank {}: error: called MPI_Abort", m[1].str())});
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
  static const std::regex rank_error(R"(^fulcrum: rank \d+: error: )");
  if (std::regex_search(text.begin(), text.end(), rank_error)) {
    // Held until the job has ended: the ranks the failure stopped report too, and only one line is the cause.
    static const std::regex names_rank(R"((receive from|send to) rank \d+|rank \d+ never arrived)");
    int priority = kRankError;
    if (text.find(": timed out after ") != std::string_view::npos) {
      priority = std::regex_search(text.begin(), text.end(), names_rank) ? kTimeoutNamingRank : kTimeout;
    }
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
