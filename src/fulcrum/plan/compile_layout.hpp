// compile's bookkeeping, one job each: OwnerMap answers which rank holds which rows of a document;
// RankBuilder collects one rank's buffers and instructions while the compiler walks the tasks, and
// emits them as a Program in the schedule's order.
#pragma once

#include "fulcrum/core/interval.hpp"
#include "fulcrum/plan/program.hpp"
#include "fulcrum/workload/batch.hpp"

#include <map>
#include <string>
#include <vector>

namespace fulcrum::compile_detail {

/// Each task group has its own workspace, named by a slot: nano-batch nb's local or remote work. A call
/// reads its whole workspace (the kernels copy it head-major), so local work that runs while the remote
/// work's receives are pending must not share buffers with them.
inline int workspace_slot(int nb, bool local) { return 2 * nb + (local ? 1 : 0); }

class OwnerMap {
 public:
  /// Tokens `tokens` of a document live on `rank` at rows [row, row + tokens.size()) of its buffers.
  struct Piece {
    int rank = 0;
    Tokens row = 0;
    Range tokens;
  };
  explicit OwnerMap(const Batch& batch);
  /// The owners of `tokens` of `doc`, in token order, clipped to `tokens`.
  std::vector<Piece> pieces(int doc, Range tokens) const;
  bool owned_by(int doc, Range tokens, int rank) const;
  /// Rank r's rows, in row order.
  std::vector<OwnedRows> owned_rows(int rank) const;

 private:
  std::vector<std::vector<Piece>> by_doc_;
  std::vector<std::vector<OwnedRows>> by_rank_;
};

/// Keys `tokens` of kv heads `heads` (all, or some kv heads).
struct KeyPiece {
  Range tokens;
  HeadRange heads;
};

class RankBuilder {
 public:
  /// `nano_batches`: how many ordered nano-batches (pingpong 2, a planner's divisions T, single-stream 1).
  RankBuilder(int rank, const OwnerMap& owners, Pass pass, int nano_batches, int kv_heads);

  /// The rank's own buffer of `field` (inputs and outputs, one row per owned token).
  int own(Field field) const;
  /// A slot's workspace buffer of `field`, created on first use.
  int workspace(int slot, Field field);
  /// The buffer that receives partial results of `field` from other servers, created on first use.
  int part(Field field);
  Tokens allocate_q_rows(int slot, Tokens rows);
  Tokens allocate_part_rows(Field field, Tokens rows);

  /// K/V rows: reserve every key range a slot's tasks read first, then allocate; afterwards each
  /// connected stretch of one document's reserved keys is one block of rows.
  void reserve_keys(int slot, int doc, Range keys);
  void allocate_key_blocks();
  Tokens key_row(int slot, int doc, Tokens position) const;
  /// The part of keys `needed` x kv heads `heads` not yet fetched into the slot's K/V rows of `doc`, as
  /// pieces of consecutive kv heads (one piece per gap when every task reads all heads); marks it fetched.
  /// Tasks over different heads share the rows, and each kv head of a key is fetched once.
  std::vector<KeyPiece> keys_missing(int slot, int doc, Range needed, HeadRange heads);

  CommLaunch& dispatch(int nb) { return dispatch_[nb]; }
  CommLaunch& return_launch(int nb) { return return_[nb]; }
  void dispatch_copy(int nb, const Copy& copy) { dispatch_copies_[nb].push_back(copy); }
  void return_copy(const Copy& copy) { return_copies_.push_back(copy); }
  void add_compute(int slot, std::vector<AttentionItem> items);
  void add_reduce(Reduce reduce) { reduces_.push_back(std::move(reduce)); }

  /// The Program, instructions in the order the schedule describes (compile.hpp); empty launches,
  /// their waits and empty calls are left out.
  Program finish();

 private:
  int add_buffer(const std::string& name, Field field, BufferInit init, bool output);
  Operation attention_call(int slot, std::vector<AttentionItem> items);

  struct KeyBlocks {
    RangeSet reserved;
    std::vector<std::pair<Range, Tokens>> blocks;  // tokens -> first row
    PerHeadRangeSet fetched;                       // per kv head
  };

  int rank_;
  Pass pass_;
  std::vector<OwnedRows> owned_;
  std::vector<Buffer> buffers_;
  std::map<Field, int> own_;
  std::map<std::pair<int, Field>, int> workspace_;
  std::map<Field, int> part_;
  std::map<Field, Tokens> part_rows_;
  int nano_batches_;
  int kv_heads_;
  // Per slot (2 per nano-batch) and per nano-batch.
  std::vector<Tokens> q_rows_, kv_rows_;
  std::vector<std::map<int, KeyBlocks>> keys_;
  std::vector<std::vector<AttentionItem>> compute_;
  std::vector<CommLaunch> dispatch_, return_;
  std::vector<std::vector<Copy>> dispatch_copies_;
  std::vector<Copy> return_copies_;
  std::vector<Reduce> reduces_;
};

}  // namespace fulcrum::compile_detail
