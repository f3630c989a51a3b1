#include "fulcrum/runtime/mpi_communicator.hpp"

#include "fulcrum/core/error.hpp"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <functional>
#include <iterator>
#include <string_view>
#include <utility>

namespace fulcrum::runtime {

namespace detail {

void throw_mpi_error(const char* file, int line, const char* call, int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) length = 0;
  // Name the rank when MPI can still tell it (not before MPI_Init or after MPI_Finalize).
  int initialized = 0, finalized = 0, rank = -1;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  throw Error(
      fmt::format("{}{}:{}: {} failed: {} (MPI error code {})", rank >= 0 ? fmt::format("rank {}: ", rank) : "", file,
                  line, call, length > 0 ? std::string_view(text, static_cast<std::size_t>(length)) : "unknown error",
                  code),
      ErrorKind::kRuntime);
}

}  // namespace detail

namespace {

using Clock = std::chrono::steady_clock;

// How a poller waits when nothing completed: a few yields first (cheap, and enough for small messages
// on an idle machine), then short sleeps, so a poller never holds a core that compute threads or the
// other ranks of an oversubscribed machine need.
class Backoff {
 public:
  void pause() {
    if (idle_++ < kYields) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
  void reset() { idle_ = 0; }

 private:
  static constexpr int kYields = 16;
  int idle_ = 0;
};

// Cancels and frees a request nobody will wait for (only on error paths and teardown).
void abandon(MPI_Request& request) {
  if (request == MPI_REQUEST_NULL) return;
  MPI_Cancel(&request);
  MPI_Request_free(&request);
}

}  // namespace

MpiSession::MpiSession(int* argc, char*** argv) {
  int initialized = 0;
  FULCRUM_MPI_CHECK(MPI_Initialized(&initialized));
  if (initialized) fail_runtime("MpiSession: MPI is already initialised; create one session per process");
  int provided = MPI_THREAD_SINGLE;
  FULCRUM_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided));
  if (provided < MPI_THREAD_MULTIPLE) {
    MPI_Finalize();
    fail_runtime(
        "MPI thread level provided = {}: need MPI_THREAD_MULTIPLE ({}), since the progress thread "
        "tests requests while the main thread posts them",
        provided, MPI_THREAD_MULTIPLE);
  }
  // Without this the default handler (MPI_ERRORS_ARE_FATAL) aborts the job before FULCRUM_MPI_CHECK
  // could report which call failed.
  FULCRUM_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  FULCRUM_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank_));
  FULCRUM_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world_size_));
}

MpiSession::~MpiSession() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

MpiCommunicator::MpiCommunicator(MpiProgress progress, MPI_Comm base) : progress_(progress) {
  FULCRUM_MPI_CHECK(MPI_Comm_dup(base, &comm_));
  FULCRUM_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  FULCRUM_MPI_CHECK(MPI_Comm_dup(comm_, &notes_));
  FULCRUM_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  FULCRUM_MPI_CHECK(MPI_Comm_size(comm_, &size_));
  int* tag_ub = nullptr;
  int found = 0;
  FULCRUM_MPI_CHECK(MPI_Comm_get_attr(comm_, MPI_TAG_UB, &tag_ub, &found));
  if (found && tag_ub != nullptr) max_tag_ = *tag_ub;
  if (progress_ == MpiProgress::kThread) thread_ = std::thread([this] { progress_loop(); });
}

MpiCommunicator::~MpiCommunicator() {
  if (thread_.joinable()) {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    work_.notify_all();
    thread_.join();
  }
  // Requests still pending here belong to launches nobody waited for (an error unwound past them).
  for (MPI_Request& request : incoming_requests_) abandon(request);
  for (auto& [handle, launch] : launches_) {
    for (MPI_Request& request : launch.requests) abandon(request);
  }
  settle_abandoned_collectives();
  MPI_Comm_free(&notes_);
  MPI_Comm_free(&comm_);
}

int MpiCommunicator::launch(std::span<const WireMessage> sends, std::span<const WireMessage> receives) {
  auto check = [&](const WireMessage& m, const char* kind) {
    if (m.peer < 0 || m.peer >= size_) fail("rank {}: {} peer = {}: must be in [0, {})", rank_, kind, m.peer, size_);
    if (m.tag < 0 || m.tag > max_tag_) {
      fail("rank {}: {} with rank {} tag = {}: must be in [0, {}] (MPI_TAG_UB of this MPI)", rank_, kind, m.peer, m.tag,
           max_tag_);
    }
    if (m.bytes > static_cast<std::size_t>(INT_MAX)) {
      fail("rank {}: {} with rank {} tag {} bytes = {}: MPI counts are int, must be <= {}", rank_, kind, m.peer, m.tag,
           m.bytes, INT_MAX);
    }
    if (m.bytes > 0 && m.data == nullptr) {
      fail("rank {}: {} with rank {} tag {} has {} bytes but no data pointer", rank_, kind, m.peer, m.tag, m.bytes);
    }
  };
  for (const WireMessage& m : sends) check(m, "send");
  for (const WireMessage& m : receives) check(m, "receive");

  Launch launch;
  launch.times.launched_s = now_s();
  // Receives first: a receive posted before its message arrives avoids an unexpected-message copy.
  for (const WireMessage& m : receives) {
    MPI_Request& request = launch.requests.emplace_back(MPI_REQUEST_NULL);
    FULCRUM_MPI_CHECK(MPI_Irecv(m.data, static_cast<int>(m.bytes), MPI_BYTE, m.peer, m.tag, comm_, &request));
    launch.messages.push_back({false, m.peer, m.tag});
  }
  for (const WireMessage& m : sends) {
    MPI_Request& request = launch.requests.emplace_back(MPI_REQUEST_NULL);
    FULCRUM_MPI_CHECK(MPI_Isend(m.data, static_cast<int>(m.bytes), MPI_BYTE, m.peer, m.tag, comm_, &request));
    launch.messages.push_back({true, m.peer, m.tag});
  }
  launch.done.assign(launch.messages.size(), false);
  launch.remaining = launch.messages.size();
  if (launch.remaining == 0) launch.times.completed_s = launch.times.launched_s;

  const int handle = next_handle_++;
  {
    std::lock_guard lock(mutex_);
    Launch& stored = launches_.emplace(handle, std::move(launch)).first->second;
    if (progress_ == MpiProgress::kThread) {
      // From here on the progress thread owns the requests.
      for (std::size_t i = 0; i < stored.requests.size(); ++i) {
        incoming_requests_.push_back(stored.requests[i]);
        incoming_.push_back({handle, i});
      }
      stored.requests.clear();
    }
  }
  if (progress_ == MpiProgress::kThread) work_.notify_one();
  return handle;
}

void MpiCommunicator::progress_loop() {
  std::vector<MPI_Request> active;
  std::vector<Pending> owners;  // owners[i] is the launch message of active[i]
  std::vector<int> indices;
  Backoff backoff;
  while (true) {
    {
      std::unique_lock lock(mutex_);
      // Nothing pending: sleep until launch() hands over work (no polling while idle).
      work_.wait(lock, [&] { return stop_ || !incoming_requests_.empty() || !active.empty(); });
      if (stop_) break;
      active.insert(active.end(), incoming_requests_.begin(), incoming_requests_.end());
      owners.insert(owners.end(), incoming_.begin(), incoming_.end());
      incoming_requests_.clear();
      incoming_.clear();
      // A timed-out wait hands its launch back for cancelling (every request of it is in `active` by now).
      for (const int handle : cancel_) {
        for (std::size_t i = 0; i < active.size(); ++i) {
          if (owners[i].handle == handle) MPI_Cancel(&active[i]);
        }
      }
      cancel_.clear();
    }
    indices.resize(active.size());
    int count = 0;
    // Outside the lock: launch() may post new requests meanwhile (MPI_THREAD_MULTIPLE).
    const int code =
        MPI_Testsome(static_cast<int>(active.size()), active.data(), &count, indices.data(), MPI_STATUSES_IGNORE);
    if (code != MPI_SUCCESS) {
      try {
        FULCRUM_MPI_CHECK(code);
      } catch (const Error& e) {
        std::lock_guard lock(mutex_);
        progress_error_ = e.what();
      }
      completed_.notify_all();
      break;
    }
    if (count <= 0) {  // none done (MPI_UNDEFINED cannot happen: every active request is live)
      backoff.pause();
      continue;
    }
    backoff.reset();
    const double now = now_s();
    {
      std::lock_guard lock(mutex_);
      for (int k = 0; k < count; ++k) {
        const Pending& p = owners[static_cast<std::size_t>(indices[static_cast<std::size_t>(k)])];
        Launch& launch = launches_.at(p.handle);
        launch.done[p.index] = true;
        if (--launch.remaining == 0) launch.times.completed_s = now;
      }
    }
    // Every completion, not only a launch's last: a timed-out wait watches its receives one by one.
    completed_.notify_all();
    // MPI_Testsome set the finished requests to MPI_REQUEST_NULL; drop them.
    std::size_t kept = 0;
    for (std::size_t i = 0; i < active.size(); ++i) {
      if (active[i] == MPI_REQUEST_NULL) continue;
      active[kept] = active[i];
      owners[kept] = owners[i];
      ++kept;
    }
    active.resize(kept);
    owners.resize(kept);
  }
  // Unfinished requests go back to the communicator, whose destructor cancels and frees them.
  std::lock_guard lock(mutex_);
  incoming_requests_.insert(incoming_requests_.end(), active.begin(), active.end());
}

bool MpiCommunicator::poll(std::vector<MPI_Request>& requests, std::vector<bool>& done, std::size_t& remaining,
                           double seconds, const std::function<bool()>& enough) {
  const Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  std::vector<int> indices(requests.size());
  Backoff backoff;
  while (remaining > 0 && !(enough && enough())) {
    int count = 0;
    FULCRUM_MPI_CHECK(
        MPI_Testsome(static_cast<int>(requests.size()), requests.data(), &count, indices.data(), MPI_STATUSES_IGNORE));
    if (count > 0 && count != MPI_UNDEFINED) {
      for (int k = 0; k < count; ++k) done[static_cast<std::size_t>(indices[static_cast<std::size_t>(k)])] = true;
      remaining -= static_cast<std::size_t>(count);
      backoff.reset();
      continue;
    }
    if (Clock::now() >= deadline) return false;
    backoff.pause();
  }
  return true;
}

void MpiCommunicator::fail_timed_out(int handle, Launch& launch, std::unique_lock<std::mutex>& lock) {
  std::vector<detail::IncompleteMessage> incomplete;
  for (std::size_t i = 0; i < launch.messages.size(); ++i) {
    if (!launch.done[i]) incomplete.push_back(launch.messages[i]);
  }
  const std::string message = detail::timeout_message(rank_, timeout_s(), handle, incomplete, launch.messages.size());
  // The caller unwinds from here and frees the launch's buffers, so MPI must let go of them first: the
  // launch's requests are cancelled, and the receives (MPI writes into those) given a moment to settle.
  // A receive MPI had already matched cannot be cancelled; it ends when its data is in. Had wait thrown
  // with one still live, MPI would later write into freed memory (ASan caught the progress thread at it),
  // so then the job ends here instead, with the same message. Sends only read: a live one is left to MPI
  // (the destructor cancels and frees it).
  const auto receives_settled = [&] {
    for (std::size_t i = 0; i < launch.messages.size(); ++i) {
      if (!launch.messages[i].is_send && !launch.done[i]) return false;
    }
    return true;
  };
  const double grace_s = std::min(timeout_s(), 1.0);
  if (progress_ == MpiProgress::kThread) {
    cancel_.push_back(handle);
    work_.notify_all();
    completed_.wait_for(lock, std::chrono::duration<double>(grace_s), receives_settled);
  } else {
    for (MPI_Request& request : launch.requests) {
      if (request != MPI_REQUEST_NULL) MPI_Cancel(&request);
    }
    lock.unlock();
    poll(launch.requests, launch.done, launch.remaining, grace_s, receives_settled);
    lock.lock();
  }
  if (!receives_settled()) {
    lock.unlock();
    abort(message + "; a receive MPI had matched did not finish, so its buffer cannot be handed back");
  }
  throw Error(message, ErrorKind::kRuntime);
}

LaunchTimes MpiCommunicator::wait(int handle) {
  std::unique_lock lock(mutex_);
  auto it = launches_.find(handle);
  if (it == launches_.end()) fail("rank {}: wait for launch {}: no such launch pending", rank_, handle);
  Launch& launch = it->second;
  if (progress_ == MpiProgress::kThread) {
    const bool settled = completed_.wait_for(lock, std::chrono::duration<double>(timeout_s()),
                                             [&] { return launch.remaining == 0 || !progress_error_.empty(); });
    if (!progress_error_.empty()) fail_runtime("rank {}: MPI progress thread failed: {}", rank_, progress_error_);
    if (!settled) fail_timed_out(handle, launch, lock);
  } else {
    // Only this thread touches launches_ in kNone; no lock needed while polling.
    if (launch.remaining > 0) {
      lock.unlock();
      const bool all_done = poll(launch.requests, launch.done, launch.remaining, timeout_s());
      lock.lock();
      if (!all_done) fail_timed_out(handle, launch, lock);
      launch.times.completed_s = now_s();  // when this wait saw it: nothing watched it before
    }
  }
  const LaunchTimes times = launch.times;
  launches_.erase(it);
  return times;
}

std::string MpiCommunicator::await_collective(MPI_Request& collective) {
  // A collective's request cannot say which rank is missing. So every rank also sends a note to the next
  // rank of a ring when it reaches the collective: a rank whose note from the previous rank never came
  // names that rank (a stopped or hung rank is named by its successor, when that one waits here), at the
  // cost of one empty message per rank and collective. MPI keeps the notes between two ranks in order, and every
  // rank reaches the collectives in the same order, so the n-th note always belongs to the n-th one.
  std::vector<MPI_Request> requests{collective};
  const int previous = (rank_ + size_ - 1) % size_;
  if (size_ > 1) {
    requests.resize(3, MPI_REQUEST_NULL);
    FULCRUM_MPI_CHECK(MPI_Irecv(nullptr, 0, MPI_BYTE, previous, 0, notes_, &requests[1]));
    FULCRUM_MPI_CHECK(MPI_Isend(nullptr, 0, MPI_BYTE, (rank_ + 1) % size_, 0, notes_, &requests[2]));
  }
  std::vector<bool> done(requests.size(), false);
  std::size_t remaining = requests.size();
  const bool all_done = poll(requests, done, remaining, timeout_s());
  // MPI freed the collective's request when it completed: the caller's handle must not be used again.
  collective = requests[0];
  if (all_done) return {};
  // The notes stay posted (freed, not cancelled): should a caller go on after the timeout, a late note
  // still meets this collective's receive, not a later one's.
  for (std::size_t i = 1; i < requests.size(); ++i) {
    if (requests[i] != MPI_REQUEST_NULL) MPI_Request_free(&requests[i]);
  }
  // The collective finished and only a note is late (its sender was descheduled between posting the
  // collective and the note on a loaded machine): every rank arrived, so this is no timeout.
  if (done[0]) return {};
  const bool note_missing = size_ > 1 && !done[1];
  return note_missing ? fmt::format("rank {} never arrived", previous) : "some rank never arrived";
}

void MpiCommunicator::settle_abandoned_collectives() {
  // Give the timed-out collectives the caller's patience once more to finish (they do when the late rank
  // arrives after all). Any still live keep their buffers for the rest of the process: MPI may write them.
  std::vector<MPI_Request> requests;
  for (const AbandonedCollective& c : abandoned_) requests.push_back(c.request);
  std::vector<bool> done(requests.size(), false);
  std::size_t remaining = requests.size();
  if (remaining == 0 || poll(requests, done, remaining, timeout_s())) return;
  static std::vector<AbandonedCollective> still_live;  // reachable until exit, so not reported as a leak
  for (std::size_t i = 0; i < abandoned_.size(); ++i) {
    if (!done[i]) still_live.push_back(std::move(abandoned_[i]));  // a finished one's handle is freed: drop it
  }
  abandoned_.clear();
}

void MpiCommunicator::barrier() {
  MPI_Request request = MPI_REQUEST_NULL;
  FULCRUM_MPI_CHECK(MPI_Ibarrier(comm_, &request));
  const std::string missing = await_collective(request);
  if (!missing.empty()) {
    abandoned_.push_back({request, {}, {}});
    fail_runtime("rank {}: timed out after {} s in barrier of {} ranks: {}", rank_, timeout_s(), size_, missing);
  }
}

std::vector<double> MpiCommunicator::all_gather(std::span<const double> values) {
  const int count = static_cast<int>(values.size());
  std::vector<double> send(values.begin(), values.end());  // owned: a timed-out gather may read it later
  std::vector<double> gathered(values.size() * static_cast<std::size_t>(size_));
  MPI_Request request = MPI_REQUEST_NULL;
  FULCRUM_MPI_CHECK(
      MPI_Iallgather(send.data(), count, MPI_DOUBLE, gathered.data(), count, MPI_DOUBLE, comm_, &request));
  const std::string missing = await_collective(request);
  if (!missing.empty()) {
    abandoned_.push_back({request, std::move(send), std::move(gathered)});
    fail_runtime("rank {}: timed out after {} s in all_gather of {} values over {} ranks: {}", rank_, timeout_s(),
                 count, size_, missing);
  }
  return gathered;
}

void MpiCommunicator::abort(const std::string& message) {
  // The process ends here, so this is the last chance to say why.
  std::fprintf(stderr, "fulcrum: rank %d: error: %s\n", rank_, message.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  // MPI_Abort does not return on OpenMPI; if some MPI ever did, the caller still must not go on.
  fail_runtime("rank {}: MPI_Abort returned while aborting because of: {}", rank_, message);
}

}  // namespace fulcrum::runtime
