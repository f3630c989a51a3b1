// The executor: runs one rank's Program of a Plan with the CPU kernels over a Communicator, in
// program order on the calling thread (communication progresses in the communicator meanwhile), and
// records what each instruction did and when.
#pragma once

#include "fulcrum/plan/program.hpp"
#include "fulcrum/runtime/communicator.hpp"
#include "fulcrum/runtime/rank_buffers.hpp"
#include "fulcrum/runtime/timeline.hpp"

#include <tuple>
#include <vector>

namespace fulcrum::runtime {

struct ExecuteOptions {
  double start_s = 0;  // the job's common start on Communicator::now_s(); timeline times are relative
  // Backward sums dK/dV in task order (kernels::AttentionShape::deterministic): gradients are bitwise
  // repeatable whatever the kernel thread count, for a small cost (docs/performance.md).
  bool deterministic = false;
};

/// Where one rank's time went in one pass.
struct RankSummary {
  double attention_s = 0;      // wall time inside Attention / AttentionBackward calls
  double attention_cpu_s = 0;  // CPU time of the calling thread inside them (exact with one kernel thread)
  double other_compute_s = 0;  // copies, merges and sums
  double comm_s = 0;           // union over launches of [last peer's start, completion] (attribute_waits)
  double exposed_comm_s = 0;   // time blocked in CommWait after every peer had started its side
  double peer_wait_s = 0;      // time blocked in CommWait before that: waiting for slower ranks
  double total_s = 0;          // first instruction to last
  double bytes_sent = 0;
  double bytes_received = 0;
  double flops = 0;
};

/// One launch as this rank saw it: when it started, when its wait began and ended, when it completed.
struct LaunchRecord {
  int id = 0;
  double launched_s = 0, wait_start_s = 0, wait_end_s = 0, completed_s = 0;
};

struct ExecutionResult {
  RankSummary summary;  // comm_s, exposed_comm_s and peer_wait_s are filled by attribute_waits
  std::vector<TimelineEvent> events;
  std::vector<LaunchRecord> launches;
};

/// Splits each wait of rank `rank` into waiting for peers and exposed communication, given every
/// rank's launch times (`launched_s[r][id]`, -1 for none; all ranks share one clock): a wait's data
/// can move only once every peer it exchanges with has started the matching launch, so blocked time
/// before the last of those starts is idle time caused by slower ranks, and blocked time after it is
/// communication the schedule failed to hide. comm_s is the union of [that start, the end], the end
/// being the last message's completion, or the wait's return if the program was already waiting.
void attribute_waits(const Plan& plan, int rank, const std::vector<std::vector<double>>& launched_s,
                     ExecutionResult& result);

/// Which launch holds each side of each message of a Plan: what attribute_waits looks a rank's peers up
/// in. Built once for all ranks (the simulator), a rank's lookups cost a search instead of a scan of every
/// Program, which made attributing all ranks' waits quadratic in the ranks.
class PeerLaunches {
 public:
  /// Every message of `plan`, or (rank >= 0) only those `rank` exchanges.
  explicit PeerLaunches(const Plan& plan, int rank = -1);
  /// The launch of `peer` holding its side of message `tag` exchanged with `rank` (`peer_sends`: the
  /// peer is its sender), or -1.
  int launch(int rank, int peer, int tag, bool peer_sends) const;

 private:
  struct Side {
    std::tuple<int, int, int, bool> key;  // (rank, peer, tag, peer sends)
    int launch = 0;                       // the peer's
  };
  std::vector<Side> sides_;  // sorted by key: a flat table, as the simulator builds one per pass
};
void attribute_waits(const Plan& plan, int rank, const std::vector<std::vector<double>>& launched_s,
                     ExecutionResult& result, const PeerLaunches& peers);

/// Runs plan.programs[comm.rank()] on `buffers` (built for that program, inputs filled). If anything
/// fails midway it aborts the job through `comm` before rethrowing, since pending receives still point
/// into `buffers`.
ExecutionResult execute(const Plan& plan, RankBuffers& buffers, Communicator& comm, const ExecuteOptions& options);

}  // namespace fulcrum::runtime
