#include "fulcrum/runtime/local_communicator.hpp"

#include "fulcrum/core/error.hpp"

#include <chrono>
#include <cstring>
#include <exception>
#include <thread>

namespace fulcrum::runtime {

namespace {

using Clock = std::chrono::steady_clock;

Clock::time_point deadline_after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

}  // namespace

LocalHub::LocalHub(int ranks) : size_(ranks) {
  if (ranks < 1) fail("ranks = {}: must be >= 1", ranks);
  next_handle_.assign(static_cast<std::size_t>(ranks), 0);
  gather_arrived_.assign(static_cast<std::size_t>(ranks), false);
}

void LocalHub::abort(const std::string& message) {
  {
    std::lock_guard lock(mutex_);
    if (aborted_) return;  // the first reason is the one worth reporting
    aborted_ = true;
    abort_message_ = message;
  }
  changed_.notify_all();
}

bool LocalHub::aborted() const {
  std::lock_guard lock(mutex_);
  return aborted_;
}

void LocalHub::throw_aborted(int rank) const { fail_runtime("rank {}: job aborted: {}", rank, abort_message_); }

void LocalHub::complete(Launch& launch, std::size_t index, double now) {
  launch.messages[index].done = true;
  if (--launch.remaining == 0) launch.times.completed_s = now;
}

void LocalHub::pair(const Unmatched& send, const Unmatched& receive) {
  Launch& from = launches_.at({send.rank, send.handle});
  Launch& to = launches_.at({receive.rank, receive.handle});
  const Message& s = from.messages[send.index];
  const Message& r = to.messages[receive.index];
  if (s.bytes != r.bytes) {
    // Both sides learn of it: each waiter throws instead of one of them timing out later.
    std::string error =
        fmt::format("byte count mismatch for tag {}: rank {} sends {} bytes to rank {}, which receives {} bytes", s.tag,
                    send.rank, s.bytes, receive.rank, r.bytes);
    from.error = error;
    to.error = error;
  } else if (s.bytes > 0) {
    std::memcpy(r.data, s.data, s.bytes);
  }
  const double now = Communicator::now_s();
  complete(from, send.index, now);
  complete(to, receive.index, now);
}

void LocalHub::withdraw(int rank, int handle) {
  const auto it = launches_.find({rank, handle});
  if (it == launches_.end()) return;
  const auto& messages = it->second.messages;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const Message& m = messages[i];
    if (m.done) continue;
    auto& queues = m.is_send ? unmatched_sends_ : unmatched_receives_;
    const auto queue = queues.find(m.is_send ? Key{rank, m.peer, m.tag} : Key{m.peer, rank, m.tag});
    if (queue == queues.end()) continue;
    std::erase_if(queue->second,
                  [&](const Unmatched& u) { return u.rank == rank && u.handle == handle && u.index == i; });
  }
  launches_.erase(it);
}

void LocalHub::post(int rank, int handle, std::size_t index) {
  const Message& m = launches_.at({rank, handle}).messages[index];
  const Unmatched self{rank, handle, index};
  if (m.is_send) {
    auto& waiting = unmatched_receives_[Key{rank, m.peer, m.tag}];
    if (waiting.empty()) {
      unmatched_sends_[Key{rank, m.peer, m.tag}].push_back(self);
      return;
    }
    const Unmatched receive = waiting.front();
    waiting.pop_front();
    pair(self, receive);
  } else {
    auto& waiting = unmatched_sends_[Key{m.peer, rank, m.tag}];
    if (waiting.empty()) {
      unmatched_receives_[Key{m.peer, rank, m.tag}].push_back(self);
      return;
    }
    const Unmatched send = waiting.front();
    waiting.pop_front();
    pair(send, self);
  }
}

std::vector<double> LocalHub::collect(int rank, std::span<const double> values, const char* what, double timeout_s) {
  std::unique_lock lock(mutex_);
  if (aborted_) throw_aborted(rank);
  if (gather_count_ == 0) {
    gather_values_per_rank_ = values.size();
    gather_values_.assign(values.size() * static_cast<std::size_t>(size_), 0.0);
  } else if (values.size() != gather_values_per_rank_) {
    fail_runtime("rank {}: {} with {} values, but the ranks before passed {} each", rank, what, values.size(),
                 gather_values_per_rank_);
  }
  std::copy(values.begin(), values.end(),
            gather_values_.begin() + static_cast<std::ptrdiff_t>(values.size() * static_cast<std::size_t>(rank)));
  gather_arrived_[static_cast<std::size_t>(rank)] = true;
  const long round = gather_generation_;
  if (++gather_count_ == size_) {
    gather_result_ = std::move(gather_values_);
    gather_values_.clear();
    gather_arrived_.assign(gather_arrived_.size(), false);
    gather_count_ = 0;
    ++gather_generation_;
    changed_.notify_all();
    return gather_result_;
  }
  const bool done =
      changed_.wait_until(lock, deadline_after(timeout_s), [&] { return aborted_ || gather_generation_ != round; });
  if (aborted_) throw_aborted(rank);
  if (!done) {
    std::string missing;
    for (std::size_t r = 0; r < gather_arrived_.size(); ++r) {
      if (!gather_arrived_[r]) missing += fmt::format("{}{}", missing.empty() ? "" : ", ", r);
    }
    fail_runtime("rank {}: timed out after {} s in {} ({} of {} ranks arrived; missing ranks {})", rank, timeout_s,
                 what, gather_count_, size_, missing);
  }
  return gather_result_;
}

LocalCommunicator::LocalCommunicator(LocalHub& hub, int rank) : hub_(hub), rank_(rank) {
  if (rank < 0 || rank >= hub.size()) fail("rank = {}: must be in [0, {})", rank, hub.size());
}

int LocalCommunicator::launch(std::span<const WireMessage> sends, std::span<const WireMessage> receives) {
  // Check everything before posting anything, so a bad message leaves no half-posted launch behind.
  auto check = [&](const WireMessage& m, const char* kind) {
    if (m.peer < 0 || m.peer >= size()) {
      fail("rank {}: {} peer = {}: must be in [0, {})", rank_, kind, m.peer, size());
    }
    if (m.tag < 0) fail("rank {}: {} to/from rank {} tag = {}: must be >= 0", rank_, kind, m.peer, m.tag);
    if (m.bytes > 0 && m.data == nullptr) {
      fail("rank {}: {} with rank {} tag {} has {} bytes but no data pointer", rank_, kind, m.peer, m.tag, m.bytes);
    }
  };
  for (const WireMessage& m : sends) check(m, "send");
  for (const WireMessage& m : receives) check(m, "receive");

  LocalHub::Launch launch;
  for (const WireMessage& m : receives) launch.messages.push_back({false, m.peer, m.tag, m.data, m.bytes, false});
  for (const WireMessage& m : sends) launch.messages.push_back({true, m.peer, m.tag, m.data, m.bytes, false});
  launch.remaining = launch.messages.size();
  launch.times.launched_s = now_s();
  if (launch.remaining == 0) launch.times.completed_s = launch.times.launched_s;

  int handle = 0;
  {
    std::lock_guard lock(hub_.mutex_);
    if (hub_.aborted_) hub_.throw_aborted(rank_);
    handle = hub_.next_handle_[static_cast<std::size_t>(rank_)]++;
    auto& stored = hub_.launches_.emplace(std::pair{rank_, handle}, std::move(launch)).first->second;
    for (std::size_t i = 0; i < stored.messages.size(); ++i) hub_.post(rank_, handle, i);
  }
  hub_.changed_.notify_all();
  return handle;
}

LaunchTimes LocalCommunicator::wait(int handle) {
  std::unique_lock lock(hub_.mutex_);
  auto it = hub_.launches_.find({rank_, handle});
  if (it == hub_.launches_.end()) fail("rank {}: wait for launch {}: no such launch pending", rank_, handle);
  LocalHub::Launch& launch = it->second;
  const bool settled = hub_.changed_.wait_until(lock, deadline_after(timeout_s()), [&] {
    return hub_.aborted_ || launch.remaining == 0 || !launch.error.empty();
  });
  if (hub_.aborted_) {
    hub_.withdraw(rank_, handle);
    hub_.throw_aborted(rank_);
  }
  if (!launch.error.empty()) {
    const std::string error = launch.error;
    hub_.withdraw(rank_, handle);
    fail_runtime("rank {}: launch {}: {}", rank_, handle, error);
  }
  if (!settled) {
    std::vector<detail::IncompleteMessage> incomplete;
    for (const auto& m : launch.messages) {
      if (!m.done) incomplete.push_back({m.is_send, m.peer, m.tag});
    }
    const std::string message = detail::timeout_message(rank_, timeout_s(), handle, incomplete, launch.messages.size());
    hub_.withdraw(rank_, handle);
    throw Error(message, ErrorKind::kRuntime);
  }
  const LaunchTimes times = launch.times;
  hub_.launches_.erase(it);
  return times;
}

void LocalCommunicator::barrier() { hub_.collect(rank_, {}, "barrier", timeout_s()); }

std::vector<double> LocalCommunicator::all_gather(std::span<const double> values) {
  return hub_.collect(rank_, values, "all_gather", timeout_s());
}

void LocalCommunicator::abort(const std::string& message) { hub_.abort(message); }

void run_local_ranks(int ranks, const std::function<void(Communicator&)>& body, double timeout_s) {
  LocalHub hub(ranks);
  std::mutex error_mutex;
  std::string first_error;
  ErrorKind first_kind = ErrorKind::kRuntime;

  auto run_rank = [&](int rank) {
    auto record = [&](const std::string& what, ErrorKind kind) {
      {
        std::lock_guard lock(error_mutex);
        if (first_error.empty()) {
          // Errors raised by the communicator already start with "rank R: "; do not say it twice.
          const std::string prefix = fmt::format("rank {}: ", rank);
          first_error = what.starts_with(prefix) ? what : prefix + what;
          first_kind = kind;
        }
      }
      // Recorded before aborting, so the waiters' "job aborted" errors can never come first.
      hub.abort(fmt::format("rank {} failed: {}", rank, what));
    };
    try {
      LocalCommunicator comm(hub, rank);
      comm.set_timeout_s(timeout_s);
      body(comm);
    } catch (const Error& e) {
      record(e.what(), e.kind());
    } catch (const std::exception& e) {
      record(e.what(), ErrorKind::kRuntime);
    } catch (...) {
      record("unknown exception", ErrorKind::kRuntime);
    }
  };

  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) threads.emplace_back(run_rank, r);
  for (std::thread& t : threads) t.join();
  if (!first_error.empty()) throw Error(first_error, first_kind);
}

}  // namespace fulcrum::runtime
