// Point-to-point and small collective communication between the ranks of a job, behind one interface:
// `MpiCommunicator` for real processes (mpi_communicator.hpp), `LocalCommunicator` for ranks that are
// threads of one process (local_communicator.hpp, unit tests). The executor only sees this.
//
// Every blocking call waits at most `timeout_s` (the watchdog): a peer that died or hangs turns into a
// runtime fulcrum::Error on every rank that waits for it, naming what it waited for, instead of a hang.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace fulcrum::runtime {

/// One message of a launch: `bytes` bytes at `data` sent to, or received from, rank `peer` with `tag`.
/// The memory must stay valid until the launch's wait returns.
struct WireMessage {
  int peer = 0;
  int tag = 0;
  void* data = nullptr;
  std::size_t bytes = 0;
};

/// When a launch's messages were all complete, in seconds on the communicator's clock (now_s()).
struct LaunchTimes {
  double launched_s = 0;
  double completed_s = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  /// Starts every send and receive; returns at once with a handle for wait(). Messages between the
  /// same two ranks are matched by tag.
  virtual int launch(std::span<const WireMessage> sends, std::span<const WireMessage> receives) = 0;
  /// Blocks until every message of the launch is done; returns when it was launched and completed.
  /// Throws a runtime Error after timeout_s, or when the job was aborted.
  virtual LaunchTimes wait(int handle) = 0;

  virtual void barrier() = 0;
  /// Every rank's `values` (each rank passes the same count), concatenated in rank order.
  virtual std::vector<double> all_gather(std::span<const double> values) = 0;

  /// Ends the whole job because of `message`. MPI prints "fulcrum: rank R: error: message" on stderr
  /// and never returns; the Local backend wakes every waiting rank with an Error carrying it instead.
  virtual void abort(const std::string& message) = 0;

  /// Seconds on a monotonic clock shared by all ranks of one machine (for timelines).
  static double now_s();

  double timeout_s() const { return timeout_s_; }
  void set_timeout_s(double seconds) { timeout_s_ = seconds; }

 private:
  double timeout_s_ = 60;
};

namespace detail {

/// A message that had not completed when a wait timed out (for the Error's text).
struct IncompleteMessage {
  bool is_send = false;
  int peer = 0;
  int tag = 0;
};

/// "rank R: timed out after S s waiting for launch H (N of M messages incomplete: receive from rank X
/// tag T, ...)": the one wording both backends use, so a log reads the same whichever one ran.
std::string timeout_message(int rank, double timeout_s, int handle, std::span<const IncompleteMessage> incomplete,
                            std::size_t total);

}  // namespace detail

}  // namespace fulcrum::runtime
