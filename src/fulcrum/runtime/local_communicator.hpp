// Ranks that are threads of one process: the Communicator for unit tests and for running a plan's
// programs side by side without MPI. A LocalHub is the shared "network"; each thread owns one
// LocalCommunicator on it. Messages are copied with memcpy when a send meets its receive.
#pragma once

#include "fulcrum/runtime/communicator.hpp"

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace fulcrum::runtime {

/// State shared by the `size` ranks of one in-process job. Thread-safe; all waiting is on one
/// condition variable, so a waiter sleeps until something it may care about changed.
class LocalHub {
 public:
  explicit LocalHub(int ranks);
  int size() const { return size_; }

  /// Marks the job aborted and wakes every waiting rank; their waits throw an Error containing `message`.
  void abort(const std::string& message);
  bool aborted() const;

 private:
  friend class LocalCommunicator;

  struct Message {
    bool is_send = false;
    int peer = 0;
    int tag = 0;
    void* data = nullptr;
    std::size_t bytes = 0;
    bool done = false;
  };
  struct Launch {
    std::vector<Message> messages;
    std::size_t remaining = 0;
    LaunchTimes times;
    std::string error;  // set when a pair did not fit (byte counts differ)
  };
  // A message waiting for its partner: whose launch, and which message of it.
  struct Unmatched {
    int rank = 0;
    int handle = 0;
    std::size_t index = 0;
  };
  using Key = std::tuple<int, int, int>;  // (source rank, destination rank, tag)

  // Called with mutex_ held.
  void post(int rank, int handle, std::size_t index);
  void complete(Launch& launch, std::size_t index, double now);
  void pair(const Unmatched& send, const Unmatched& receive);
  // Takes a launch whose wait throws out of the hub: its unmatched messages leave the queues, so no later
  // partner copies into (or from) the buffers its caller frees while unwinding.
  void withdraw(int rank, int handle);
  std::vector<double> collect(int rank, std::span<const double> values, const char* what, double timeout_s);
  [[noreturn]] void throw_aborted(int rank) const;

  int size_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  bool aborted_ = false;
  std::string abort_message_;

  std::vector<int> next_handle_;                    // per rank
  std::map<std::pair<int, int>, Launch> launches_;  // (rank, handle); map nodes stay put
  std::map<Key, std::deque<Unmatched>> unmatched_sends_;
  std::map<Key, std::deque<Unmatched>> unmatched_receives_;

  // One collective round at a time (all_gather; barrier is an all_gather of nothing).
  std::vector<double> gather_values_;
  std::vector<bool> gather_arrived_;
  int gather_count_ = 0;
  std::size_t gather_values_per_rank_ = 0;
  long gather_generation_ = 0;
  std::vector<double> gather_result_;  // of round gather_generation_ - 1; read before the next can end
};

/// One rank's view of a LocalHub. Use from one thread at a time (the rank's own thread).
class LocalCommunicator final : public Communicator {
 public:
  LocalCommunicator(LocalHub& hub, int rank);

  int rank() const override { return rank_; }
  int size() const override { return hub_.size(); }
  int launch(std::span<const WireMessage> sends, std::span<const WireMessage> receives) override;
  LaunchTimes wait(int handle) override;
  void barrier() override;
  std::vector<double> all_gather(std::span<const double> values) override;
  void abort(const std::string& message) override;

 private:
  LocalHub& hub_;
  int rank_;
};

/// Runs `body` on `ranks` threads, each with its own LocalCommunicator (timeout `timeout_s`) on one
/// hub. If a rank throws, the hub is aborted so the others wake instead of waiting for it; after all
/// threads are joined the first error is rethrown as a runtime Error prefixed "rank R: ".
void run_local_ranks(int ranks, const std::function<void(Communicator&)>& body, double timeout_s = 60);

}  // namespace fulcrum::runtime
