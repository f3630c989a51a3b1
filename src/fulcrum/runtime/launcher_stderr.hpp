// What the `fulcrum` launcher shows of its mpiexec's stderr, which carries mpiexec's own reports and every
// rank's stderr, line by line. The ranks' lines pass through; mpiexec's framed help banners and Open MPI's
// "[host:pid] ..." diagnostics are kept out; and the errors that bring a job down (each failing or timed-out
// rank's "fulcrum: rank R: error: ..." line, a rank killed by a signal, which only mpiexec's banner tells)
// come out as one line, chosen once mpiexec has ended.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fulcrum::runtime {

class LauncherStderr {
 public:
  /// One line of mpiexec's stderr, without its newline: what to print now, if anything.
  std::optional<std::string> line(std::string_view text);
  /// Once mpiexec has exited with `exit_code`, or was killed by `signal` (when nonzero): the one error line
  /// that tells why the job failed, if any: a rank killed by a signal (the cause: the other ranks' errors
  /// follow from it), else a rank's own error, else a watchdog timeout that names the rank it waited for,
  /// else any other rank's error; with none of these, mpiexec's signal or, for a nonzero exit, mpiexec's
  /// own report in one line.
  std::optional<std::string> finish(int exit_code, int signal = 0) const;

 private:
  struct Candidate {
    int priority = 0;  // lower is more telling
    std::string text;
  };
  void banner_line(std::string_view text);

  bool in_banner_ = false;
  bool banner_blank_seen_ = false;  // the first banner's first paragraph is complete
  std::string first_banner_;        // the first paragraph of mpiexec's first banner
  std::vector<Candidate> candidates_;
  std::vector<std::string> passed_;  // the "fulcrum: ..." lines printed so far (printed once each)
};

/// "SIGKILL" for 9 and the other common signals by their names; "signal N" for the rest.
std::string signal_name(int signal);

}  // namespace fulcrum::runtime
