// The Communicator for real processes: OpenMPI point-to-point (MPI_Isend/MPI_Irecv) on a duplicate of
// MPI_COMM_WORLD, with collectives posted non-blocking and polled, so the watchdog (timeout_s) covers
// every wait. MpiSession owns MPI_Init/MPI_Finalize; FULCRUM_MPI_CHECK turns MPI error codes into Errors.
#pragma once

#include "fulcrum/runtime/communicator.hpp"

#include <mpi.h>

#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace fulcrum::runtime {

namespace detail {
[[noreturn]] void throw_mpi_error(const char* file, int line, const char* call, int code);
}  // namespace detail

}  // namespace fulcrum::runtime

/// Runs an MPI call; if it returns an error code, throws a runtime fulcrum::Error carrying file:line,
/// the call's text and MPI_Error_string. Needs MPI_ERRORS_RETURN on the communicator (MpiSession sets it).
#define FULCRUM_MPI_CHECK(call)                                                                  \
  do {                                                                                           \
    const int fulcrum_mpi_code_ = (call);                                                        \
    if (fulcrum_mpi_code_ != MPI_SUCCESS) {                                                      \
      ::fulcrum::runtime::detail::throw_mpi_error(__FILE__, __LINE__, #call, fulcrum_mpi_code_); \
    }                                                                                            \
  } while (false)

namespace fulcrum::runtime {

/// MPI for the life of this object: MPI_Init_thread asking for MPI_THREAD_MULTIPLE (a runtime Error if
/// the library gives less), MPI_ERRORS_RETURN on MPI_COMM_WORLD, MPI_Finalize in the destructor.
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  MpiSession() : MpiSession(nullptr, nullptr) {}
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }

 private:
  int world_rank_ = 0;
  int world_size_ = 1;
};

/// Who drives the messages between the calls that start and end them.
/// kThread: a progress thread tests pending requests, so transfers advance (and their completion time
///          is recorded) while the caller computes. kNone: they advance only inside wait().
enum class MpiProgress { kThread, kNone };

class MpiCommunicator final : public Communicator {
 public:
  /// Works on a duplicate of `base`, so its messages never meet anyone else's.
  explicit MpiCommunicator(MpiProgress progress = MpiProgress::kThread, MPI_Comm base = MPI_COMM_WORLD);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  MpiProgress progress() const { return progress_; }
  /// The largest tag this MPI accepts (MPI_TAG_UB; at least 32767 by the standard).
  int max_tag() const { return max_tag_; }

  int launch(std::span<const WireMessage> sends, std::span<const WireMessage> receives) override;
  LaunchTimes wait(int handle) override;
  void barrier() override;
  std::vector<double> all_gather(std::span<const double> values) override;
  /// MPI_Abort on MPI_COMM_WORLD: ends every process of the job. Does not return.
  void abort(const std::string& message) override;

 private:
  struct Launch {
    std::vector<MPI_Request> requests;                // owned by the progress thread once handed over
    std::vector<detail::IncompleteMessage> messages;  // same order as requests
    std::vector<bool> done;
    std::size_t remaining = 0;
    LaunchTimes times;
  };
  // A request the progress thread is testing: which launch and which of its messages.
  struct Pending {
    int handle = 0;
    std::size_t index = 0;
  };

  void progress_loop();
  // Tests `requests` (with backoff) until all are done, or `enough` says so, or `seconds` pass; returns
  // whether all are done.
  bool poll(std::vector<MPI_Request>& requests, std::vector<bool>& done, std::size_t& remaining, double seconds,
            const std::function<bool()>& enough = {});
  // A wait timed out (`lock` held): cancels the launch's requests, then throws the timeout Error once MPI
  // holds none of its receive buffers; aborts the job with that message if a receive will not let go.
  [[noreturn]] void fail_timed_out(int handle, Launch& launch, std::unique_lock<std::mutex>& lock);
  // Waits for a posted collective under the watchdog; on a timeout returns who is missing, as far as
  // this rank can tell ("rank R never arrived" or "some rank never arrived"), else an empty string.
  // Sets `collective` to MPI_REQUEST_NULL when it completed (MPI freed it), so only live ones are kept.
  std::string await_collective(MPI_Request& collective);
  // Waits up to the timeout for the collectives that timed out earlier; keeps the unfinished ones' buffers.
  void settle_abandoned_collectives();

  MpiProgress progress_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Comm notes_ = MPI_COMM_NULL;  // the collectives' arrival notes (await_collective), apart from the data
  int rank_ = 0;
  int size_ = 1;
  int max_tag_ = 32767;
  int next_handle_ = 0;

  std::mutex mutex_;
  std::condition_variable completed_;  // the progress thread finished a launch or failed
  std::condition_variable work_;       // the progress thread has new requests or must stop
  std::map<int, Launch> launches_;
  std::vector<MPI_Request> incoming_requests_;  // posted, not yet picked up by the progress thread
  std::vector<Pending> incoming_;
  std::vector<int> cancel_;  // launches whose wait timed out: the progress thread cancels their requests
  bool stop_ = false;
  std::string progress_error_;  // set when an MPI call in the progress thread failed
  std::thread thread_;
  // A collective that timed out here is still live in MPI (a collective request cannot be cancelled or
  // freed), and may yet complete, reading `send` and writing `receive`: they stay alive with it.
  struct AbandonedCollective {
    MPI_Request request = MPI_REQUEST_NULL;
    std::vector<double> send;
    std::vector<double> receive;
  };
  std::vector<AbandonedCollective> abandoned_;
};

}  // namespace fulcrum::runtime
