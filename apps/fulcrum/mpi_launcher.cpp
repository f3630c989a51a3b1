#include "mpi_launcher.hpp"

#include "verbosity.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/runtime/launcher_stderr.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

// How a job is tied to its launcher (no process of it may outlive the launcher by more than a few seconds,
// whatever ends the launcher):
//  - mpiexec runs in a process group of its own, so a Ctrl-C at the terminal reaches only the launcher,
//    which forwards it once (Open MPI's mpiexec takes a second SIGINT as "give up cleaning up"); SIGINT,
//    SIGTERM and SIGHUP are forwarded, and mpiexec gets SIGKILL if it has not ended kGraceS later.
//  - The launcher cannot forward SIGKILL, so mpiexec asks the kernel for SIGTERM when its parent, the
//    launcher, dies (PR_SET_PDEATHSIG): SIGTERM, not SIGKILL, so that mpiexec still ends its ranks and
//    removes its session files and shared-memory segments (a killed mpiexec leaves them behind).
//  - Each rank asks the kernel for SIGKILL when its own parent, mpiexec, dies: that ends a rank even where
//    mpiexec could not (killed, or the rank stopped by SIGSTOP and never resumed), without a watcher thread
//    that a stopped rank could not run. Open MPI puts every rank in a process group of its own, so a group
//    signal could not reach them all; and the parent-death signal is the kernel's, so it needs nothing of
//    the launcher once the job runs.
// Both prctl calls check afterwards that the parent is still the expected one: the parent may have died
// between fork and prctl, and then no signal would ever come.
namespace fulcrum::cli {
namespace {

constexpr const char* kTieVariable = "FULCRUM_LAUNCHER";  // "HOST PID" of the launcher, read by the ranks
constexpr const char* kVerboseVariable = "FULCRUM_MPI_VERBOSE";
constexpr double kGraceS = 3;             // after a forwarded signal, mpiexec's time to end the job
constexpr double kDrainAfterExitS = 0.5;  // reading what mpiexec wrote just before it exited
constexpr std::array<int, 3> kForwarded = {SIGINT, SIGTERM, SIGHUP};

using Clock = std::chrono::steady_clock;

std::vector<std::string>& command_line() {
  static std::vector<std::string> args;
  return args;
}

volatile std::sig_atomic_t g_signal = 0;   // the first forwarded signal
volatile std::sig_atomic_t g_mpiexec = 0;  // its pid, once started

extern "C" void forward_to_mpiexec(int signal) {
  if (g_signal == 0) g_signal = signal;
  if (g_mpiexec > 0) kill(static_cast<pid_t>(g_mpiexec), signal);
}

std::string host_name() {
  std::array<char, 256> name{};
  if (gethostname(name.data(), name.size() - 1) != 0) return "?";
  return name.data();
}

// The parent of `pid` from /proc/PID/stat ("pid (comm) state ppid ..."; comm may hold spaces and parens).
pid_t parent_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  const std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream rest(stat.substr(close + 1));
  char state = 0;
  pid_t parent = -1;
  rest >> state >> parent;
  return rest ? parent : -1;
}

void write_line(const std::string& text) {
  std::fprintf(stderr, "%s\n", text.c_str());
  std::fflush(stderr);
}

// Relays mpiexec's stderr through `filter` until mpiexec has exited; returns its wait status. Escalates
// to SIGKILL when mpiexec outlives a forwarded signal by kGraceS.
int pump(pid_t child, int fd, runtime::LauncherStderr& filter) {
  std::string pending;
  std::optional<int> status;
  Clock::time_point signalled{}, exited{};
  bool killed = false;
  auto emit_lines = [&](bool all) {
    std::size_t start = 0;
    for (auto end = pending.find('\n'); end != std::string::npos; end = pending.find('\n', start)) {
      if (auto out = filter.line(std::string_view(pending).substr(start, end - start))) write_line(*out);
      start = end + 1;
    }
    pending.erase(0, start);
    if (all && !pending.empty()) {
      if (auto out = filter.line(pending)) write_line(*out);
      pending.clear();
    }
  };
  while (true) {
    const Clock::time_point now = Clock::now();
    if (!status) {
      int s = 0;
      if (waitpid(child, &s, WNOHANG) == child) {
        status = s;
        exited = now;
      } else if (g_signal != 0) {
        if (signalled == Clock::time_point{}) signalled = now;
        if (!killed && now - signalled > std::chrono::duration<double>(kGraceS)) {
          kill(child, SIGKILL);  // the ranks follow through their parent-death signal
          killed = true;
        }
      }
    }
    if (status && (fd < 0 || now - exited > std::chrono::duration<double>(kDrainAfterExitS))) break;
    pollfd p{fd, POLLIN, 0};
    const int ready = poll(&p, fd < 0 ? 0 : 1, 100);  // also the loop's tick while there is no pipe
    if (ready > 0) {
      std::array<char, 4096> buffer{};
      const ssize_t n = read(fd, buffer.data(), buffer.size());
      if (n > 0) {
        pending.append(buffer.data(), static_cast<std::size_t>(n));
        emit_lines(false);
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        close(fd);  // every writer is gone
        fd = -1;
      }
    }
  }
  if (fd >= 0) close(fd);
  emit_lines(true);
  return *status;
}

// mpiexec's command line: this binary with this process's arguments, on `ranks` ranks.
std::vector<std::string> mpiexec_command(int ranks) {
  std::vector<std::string> args = {FULCRUM_MPIEXEC,   "-n",        std::to_string(ranks),
                                   "--oversubscribe", "--bind-to", "none"};
  if (geteuid() == 0) args.emplace_back("--allow-run-as-root");  // containers and CI run as root
  args.push_back(std::filesystem::read_symlink("/proc/self/exe").string());
  args.insert(args.end(), command_line().begin() + 1, command_line().end());
  return args;
}

// Verbose (--verbose, or FULCRUM_MPI_VERBOSE set and neither empty nor 0): mpiexec's stderr passes
// through unchanged instead of through the filter.
bool verbose_launch() {
  const char* verbose_text = std::getenv(kVerboseVariable);
  return verbosity() == Verbosity::kVerbose ||
         (verbose_text != nullptr && std::string_view(verbose_text) != "" && std::string_view(verbose_text) != "0");
}

// SIGINT, SIGTERM and SIGHUP forwarded to mpiexec while it runs. Constructed before the fork: the
// signals stay blocked until mpiexec's pid is known (unblock), so one that comes meanwhile is forwarded,
// not lost. restore puts back the handlers and the mask found.
class SignalForwarding {
 public:
  SignalForwarding() {
    sigset_t forwarded;
    sigemptyset(&forwarded);
    for (int s : kForwarded) sigaddset(&forwarded, s);
    sigprocmask(SIG_BLOCK, &forwarded, &previous_);
    struct sigaction action {};
    action.sa_handler = forward_to_mpiexec;
    sigemptyset(&action.sa_mask);
    for (std::size_t i = 0; i < kForwarded.size(); ++i) {
      sigaction(kForwarded[i], nullptr, &previous_actions_[i]);
      // An ignored signal stays ignored (nohup's SIGHUP, SIGINT of a shell's background job).
      if (previous_actions_[i].sa_handler != SIG_IGN) sigaction(kForwarded[i], &action, nullptr);
    }
  }
  SignalForwarding(const SignalForwarding&) = delete;
  SignalForwarding& operator=(const SignalForwarding&) = delete;
  ~SignalForwarding() = default;

  // The signal mask from before: mpiexec starts with it.
  [[nodiscard]] const sigset_t& previous_mask() const { return previous_; }
  void unblock() const { sigprocmask(SIG_SETMASK, &previous_, nullptr); }
  void restore() const {
    for (std::size_t i = 0; i < kForwarded.size(); ++i) sigaction(kForwarded[i], &previous_actions_[i], nullptr);
    sigprocmask(SIG_SETMASK, &previous_, nullptr);
  }

 private:
  sigset_t previous_{};
  std::array<struct sigaction, kForwarded.size()> previous_actions_{};
};

// The forked child becomes mpiexec; only async-signal-safe calls from here to execv. Its own process
// group (a Ctrl-C at the terminal reaches the launcher only), SIGTERM when the launcher dies, stderr into
// the launcher's pipe (if any), stdin from /dev/null.
[[noreturn]] void become_mpiexec(char* const* argv, pid_t launcher, int stderr_fd, const sigset_t& mask) {
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != launcher) _exit(1);  // the launcher died before the prctl
  if (stderr_fd >= 0) dup2(stderr_fd, STDERR_FILENO);
  const int null = open("/dev/null", O_RDONLY);  // mpiexec in a background group must never read a terminal
  if (null >= 0) dup2(null, STDIN_FILENO);
  sigprocmask(SIG_SETMASK, &mask, nullptr);
  execv(argv[0], argv);
  constexpr std::string_view kCannot = "fulcrum: error: cannot start mpiexec\n";
  (void)!write(STDERR_FILENO, kCannot.data(), kCannot.size());
  _exit(127);
}

// After mpiexec has ended (wait status `status`): a forwarded signal ends this process by the same
// signal; otherwise mpiexec's exit code, with the job's failure as one line unless verbose.
int end_of_job(int status, bool verbose, runtime::LauncherStderr& filter, const SignalForwarding& signals) {
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (g_signal != 0) {
    const int signal = g_signal;
    write_line("fulcrum: error: stopped by " + runtime::signal_name(signal) + ": mpiexec and its ranks were ended");
    signals.restore();
    std::fflush(stdout);
    // End by the same signal, so that a shell or scheduler sees what happened (a shell script stops on SIGINT).
    std::signal(signal, SIG_DFL);
    std::raise(signal);
    return 128 + signal;
  }
  signals.restore();
  if (!verbose) {
    if (auto last = filter.finish(code, WIFSIGNALED(status) ? WTERMSIG(status) : 0)) write_line(*last);
  }
  return code;
}

}  // namespace

void set_command_line(int argc, char** argv) { command_line().assign(argv, argv + argc); }

// Open MPI's launcher sets these in every process it starts.
bool started_by_mpiexec() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr;
}

int relaunch_under_mpiexec(int ranks) {
  std::vector<std::string> args = mpiexec_command(ranks);
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  const bool verbose = verbose_launch();
  const pid_t launcher = getpid();
  setenv(kTieVariable, (host_name() + " " + std::to_string(launcher)).c_str(), 1);
  setenv(kStderrIsTerminal, isatty(STDERR_FILENO) != 0 ? "1" : "0", 1);
  std::array<int, 2> pipe_fds = {-1, -1};
  if (!verbose && pipe2(pipe_fds.data(), O_CLOEXEC) != 0) fail_runtime("cannot create a pipe for mpiexec's stderr");

  const SignalForwarding signals;
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t child = fork();
  if (child == 0) become_mpiexec(argv.data(), launcher, pipe_fds[1], signals.previous_mask());
  if (pipe_fds[1] >= 0) close(pipe_fds[1]);
  if (child < 0) {
    if (pipe_fds[0] >= 0) close(pipe_fds[0]);
    signals.restore();
    fail_runtime("cannot fork to start mpiexec");
  }
  g_mpiexec = child;
  signals.unblock();  // a signal that came meanwhile is forwarded now

  runtime::LauncherStderr filter;
  const int status = pump(child, pipe_fds[0], filter);
  g_mpiexec = 0;
  return end_of_job(status, verbose, filter, signals);
}

void tie_rank_to_launcher() {
  const char* tie = std::getenv(kTieVariable);
  if (tie == nullptr || !started_by_mpiexec()) return;
  std::istringstream in(tie);
  std::string host;
  pid_t launcher = -1;
  in >> host >> launcher;
  // A rank on another machine is ended with the job by its own Open MPI daemon.
  if (!in || host != host_name()) return;
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  // mpiexec may have ended before the prctl: then the parent is no longer the launcher's mpiexec.
  if (parent_of(getppid()) != launcher) _exit(1);
}

}  // namespace fulcrum::cli
