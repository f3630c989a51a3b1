// The planners' common output: which attention server computes which CA-task, and which token slices
// move between ranks for it. Compile (runtime issue) lowers it to per-rank Programs.
#pragma once

#include "fulcrum/core/interval.hpp"
#include "fulcrum/workload/batch.hpp"
#include "fulcrum/workload/model_shape.hpp"

#include <array>
#include <span>
#include <string>
#include <vector>

namespace fulcrum {

/// One unit of core-attention work: rows `queries` (one range, or a head+tail pair) of document `doc`
/// against keys `keys`, q heads `heads` (default: all), computed on rank `server`. Each head is masked
/// by its document's mask for that head (Document::mask_of). Tasks over disjoint head ranges may share
/// rows and keys; the verifier checks every (head, query, key) triple is computed exactly once.
struct CATask {
  int doc = 0;
  std::array<Range, 2> queries{};  // the second is empty for a single range
  Range keys;
  int server = 0;
  /// The planner's ordered division (DCP), which the ping-pong schedule runs as its nano-batch; -1 when
  /// the planner leaves it to the schedule (halves of each server's work). All tasks set it or none.
  int division = -1;
  HeadRange heads{};

  std::span<const Range> query_ranges() const { return {queries.data(), queries[1].empty() ? 1u : 2u}; }
  Tokens query_tokens() const { return queries[0].size() + queries[1].size(); }
};

enum class TensorKind { kQ, kKV, kOut };  // kOut is O together with its LSE
const char* to_string(TensorKind kind);

/// Transfer::dst of a broadcast: the tokens go to every rank but `src`. A ring sends every chunk to every
/// rank; one entry per chunk keeps an Assignment linear in ranks + chunks instead of ranks x chunks.
inline constexpr int kEveryRank = -1;

/// Tokens `tokens` of document `doc`'s tensor `kind` move from rank `src` to rank `dst` (or to every
/// other rank: kEveryRank), for q heads `heads` (default all): Q and O+LSE of those heads, K/V of the kv
/// heads they read (their GQA groups). Every kind names q heads, so the verifier can check a task's heads
/// without knowing the model's groups.
struct Transfer {
  TensorKind kind = TensorKind::kQ;
  int doc = 0;
  Range tokens;
  int src = 0;
  int dst = 0;
  HeadRange heads{};

  bool broadcast() const { return dst == kEveryRank; }
};

struct Assignment {
  std::string planner;
  Batch batch;  // the documents this assignment computes and where their tokens live
  std::vector<CATask> tasks;
  std::vector<Transfer> transfers;
  /// The model's q heads. 0 (unknown) is enough while every task covers all heads and no document has
  /// per-head masks; the verifier needs it to check explicit head ranges.
  int q_heads = 0;
  /// A ring planner's schedule: 0, compile the tasks as they are (fetch what each reads); > 0, every
  /// rank's K/V travels a ring of machines of `ring_node_ranks` ranks (all ranks: a flat ring), and each
  /// task runs at the ring step where its server holds its keys (compile_ring.hpp).
  int ring_node_ranks = 0;
};

/// The least traffic that lets every task run, for the task's heads only (as compile moves it): for each
/// task, the Q rows of its q heads and the K/V keys its rows can see (under the mask of any of its heads)
/// of the kv heads they read, that its server does not own, each (key, kv head) fetched once per
/// (server, document), and O+LSE of its heads sent back to each row's owner.
/// `q_heads_per_kv_head` is the model's GQA group size: K/V is tracked per group, and a K/V transfer
/// names whole groups of q heads. The default, 1, treats each q head as its own group: still enough,
/// and exact unless two tasks on one server split a group over the same keys (then that kv head counts
/// twice, where compile moves it once). The model's q heads are the largest end of a task's head range
/// (a head-split row's tasks tile its heads); with no head-split task everything is whole rows, as before.
std::vector<Transfer> minimal_transfers(const Batch& batch, std::span<const CATask> tasks, int q_heads_per_kv_head = 1);

/// Appends transfers of `range` of `kind` for q heads `heads` from its owners (per the batch's segments)
/// to `dst`, skipping tokens `dst` owns.
void add_transfers_from_owners(const Batch& batch, TensorKind kind, int doc, Range range, int dst,
                               std::vector<Transfer>& out, HeadRange heads = {});

}  // namespace fulcrum
