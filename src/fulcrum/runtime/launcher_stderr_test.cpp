// The launcher's view of mpiexec's stderr, on transcripts of Open MPI 4.1's mpiexec (the banners as it
// prints them) interleaved with the ranks' lines.
#include "fulcrum/runtime/launcher_stderr.hpp"

#include <gtest/gtest.h>

#include <csignal>
#include <optional>
#include <string>
#include <vector>

namespace fulcrum::runtime {
namespace {

const std::string kRule(74, '-');

struct Shown {
  std::vector<std::string> now;        // printed while the job ran
  std::optional<std::string> at_exit;  // the one line printed when mpiexec ended
};

Shown feed(const std::vector<std::string>& lines, int exit_code) {
  LauncherStderr filter;
  Shown shown;
  for (const auto& l : lines) {
    if (auto out = filter.line(l)) shown.now.push_back(*out);
  }
  shown.at_exit = filter.finish(exit_code);
  return shown;
}

TEST(LauncherStderr, RankKilledBySignalIsNamedFromTheBanner) {
  const Shown shown =
      feed({kRule, "Primary job  terminated normally, but 1 process returned",
            "a non-zero exit code. Per user-direction, the job has been aborted.", kRule, kRule,
            "mpiexec noticed that process rank 2 with PID 0 on node vm exited on signal 9 (Killed).", kRule},
           137);
  EXPECT_TRUE(shown.now.empty());
  EXPECT_EQ(shown.at_exit, "fulcrum: rank 2: error: killed by signal 9 (SIGKILL) on node vm");
}

TEST(LauncherStderr, AbortingRankGivesOneLineWithoutTheBanner) {
  const Shown shown = feed({"fulcrum: rank 2: error: injected failure (--inject-failure 2:throw)", kRule,
                            "MPI_ABORT was invoked on rank 2 in communicator MPI_COMM_WORLD", "with errorcode 1.", "",
                            "NOTE: invoking MPI_ABORT causes Open MPI to kill all MPI processes.", kRule},
                           1);
  EXPECT_TRUE(shown.now.empty());
  EXPECT_EQ(shown.at_exit, "fulcrum: rank 2: error: injected failure (--inject-failure 2:throw)");
}

TEST(LauncherStderr, RankErrorBeatsTheTimeoutsItCausedAndNamingTimeoutsBeatOthers) {
  const std::string vague =
      "fulcrum: rank 0: error: rank 0: timed out after 3 s in barrier of 4 ranks: some rank "
      "never arrived";
  const std::string naming =
      "fulcrum: rank 3: error: rank 3: timed out after 3 s in barrier of 4 ranks: rank 2 "
      "never arrived";
  const std::string p2p =
      "fulcrum: rank 1: error: rank 1: timed out after 3 s waiting for launch 4 (1 of 2 messages "
      "incomplete: receive from rank 2 tag 7)";
  const std::string own = "fulcrum: rank 2: error: cannot read weights";
  EXPECT_EQ(feed({vague, naming, own}, 1).at_exit, own);
  EXPECT_EQ(feed({vague, naming}, 1).at_exit, naming);
  EXPECT_EQ(feed({vague, p2p, naming}, 1).at_exit, p2p);  // equally telling: the first to arrive
  EXPECT_EQ(feed({vague}, 1).at_exit, vague);
}

TEST(LauncherStderr, SignalBeatsEveryRankError) {
  const Shown shown = feed(
      {"fulcrum: rank 0: error: rank 0: timed out after 3 s in barrier of 2 ranks: rank 1 never arrived", kRule,
       "mpiexec noticed that process rank 1 with PID 4242 on node n7 exited on signal 11 (Segmentation fault).", kRule},
      139);
  EXPECT_EQ(shown.at_exit, "fulcrum: rank 1: error: killed by signal 11 (SIGSEGV) on node n7");
}

TEST(LauncherStderr, OpenMpiDiagnosticsAreDroppedAndOtherLinesPass) {
  const Shown shown = feed({"[vm:30989] [[5619,0],0] ORTE_ERROR_LOG: Data unpack would read past end of buffer",
                            "[vm:1234] *** Process received signal ***", "table row 1", "fulcrum: wrote weights",
                            "fulcrum: wrote weights", "[not a diagnostic] kept"},
                           0);
  EXPECT_EQ(shown.now, (std::vector<std::string>{"table row 1", "fulcrum: wrote weights", "[not a diagnostic] kept"}));
  EXPECT_EQ(shown.at_exit, std::nullopt);
}

TEST(LauncherStderr, PlainErrorIsPrintedOnceAndNeedsNoSummary) {
  const std::string error = "fulcrum: error: distca / pingpong: relative error 1.00e-03 exceeds max-error 1.0e-05";
  const Shown shown = feed({error, kRule, "Primary job  terminated normally, but 1 process returned", kRule, error}, 1);
  EXPECT_EQ(shown.now, std::vector<std::string>{error});
  EXPECT_EQ(shown.at_exit, std::nullopt);
}

TEST(LauncherStderr, MpiexecsOwnFailureBecomesOneLine) {
  const Shown shown = feed({kRule, "There are not enough slots available in the system to satisfy the 5",
                            "slots that were requested by the application:", "", "  /usr/bin/fulcrum", "", kRule},
                           1);
  EXPECT_TRUE(shown.now.empty());
  EXPECT_EQ(shown.at_exit,
            "fulcrum: error: mpiexec exited with code 1: There are not enough slots available in the system to "
            "satisfy the 5 slots that were requested by the application: (FULCRUM_MPI_VERBOSE=1 shows its full "
            "report)");
  EXPECT_EQ(feed({}, 0).at_exit, std::nullopt);
  LauncherStderr killed;
  EXPECT_EQ(killed.finish(137, SIGKILL), "fulcrum: error: mpiexec was killed by signal 9 (SIGKILL)");
  EXPECT_EQ(feed({}, 3).at_exit,
            "fulcrum: error: mpiexec exited with code 3 (FULCRUM_MPI_VERBOSE=1 shows its full "
            "report)");
}

TEST(LauncherStderr, SignalNames) {
  EXPECT_EQ(signal_name(SIGKILL), "SIGKILL");
  EXPECT_EQ(signal_name(SIGTERM), "SIGTERM");
  EXPECT_EQ(signal_name(SIGSEGV), "SIGSEGV");
  EXPECT_EQ(signal_name(63), "signal 63");
}

}  // namespace
}  // namespace fulcrum::runtime
