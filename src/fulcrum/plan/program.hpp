// The Plan IR: what every rank does for one pass of core attention, as plain data. `compile` lowers an
// Assignment to it; the executor runs it on real ranks, the simulator in virtual time, `verify_plan`
// checks it, and it serialises to JSON and binary. Nothing here knows about MPI or kernels.
//
// A rank's Program is an ordered list of Instructions over the rank's named Buffers. Every buffer is
// token-major rows of one Field (its row width and element type follow from the field and the plan's
// HeadLayout). Communication is split in two: a CommLaunch starts sends and receives, a later CommWait
// blocks until they are done, so compute placed between them overlaps the traffic; the order of a
// launch's messages is the NCCL posting order (CommLaunch). Ping-pong is two (or more, a planner's
// divisions) nano-batch streams interleaved in one Program; `Instruction::stream` says which one an
// instruction belongs to (for timelines; execution is in program order).
#pragma once

#include "fulcrum/core/interval.hpp"
#include "fulcrum/plan/comm_mode.hpp"
#include "fulcrum/workload/mask.hpp"

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace fulcrum {

/// What a buffer's rows hold. Q, K, V, O and dO are stored in the run's dtype; LSE and the gradients
/// dQ, dK, dV are fp32 (the kernels accumulate gradients in fp32).
enum class Field : std::uint8_t { kQ, kK, kV, kO, kLse, kDO, kDQ, kDK, kDV };
const char* to_string(Field field);
Field parse_field(std::string_view text);
/// K, V, dK, dV: rows of key tokens, kv_heads wide; every other field has rows of query tokens.
bool is_kv_side(Field field);

/// Rows [row, row + rows) of buffer `buffer` (an index into Program::buffers), heads `heads` of each row.
/// `heads` are the buffer field's own heads: q heads for Q, O, LSE, dO and dQ, kv heads for K, V, dK and
/// dV (not the q heads that read them), so a slice names exactly the bytes it covers whatever the field;
/// HeadLayout::field_heads turns a task's q heads into them. The default, all heads, is whole rows (one
/// contiguous block); a head range is a contiguous part of every row, `rows` strided pieces.
struct Slice {
  int buffer = 0;
  Tokens row = 0;
  Tokens rows = 0;
  HeadRange heads{};
  friend bool operator==(const Slice&, const Slice&) = default;
};

/// Head layout of every attention call in a plan, and the storage dtype's size in bytes (2 or 4).
struct HeadLayout {
  int q_heads = 1;
  int kv_heads = 1;
  int head_dim = 64;
  int dtype_bytes = 4;

  /// Heads of a row of `field`: kv_heads for K, V, dK, dV, q_heads for the rest (LSE has one per q head).
  int heads_of(Field field) const;
  /// Values per head: head_dim, or 1 for LSE.
  int head_values(Field field) const { return field == Field::kLse ? 1 : head_dim; }
  /// Values per row of a buffer of `field` (e.g. q_heads * head_dim for Q, q_heads for LSE).
  Tokens row_values(Field field) const { return static_cast<Tokens>(heads_of(field)) * head_values(field); }
  /// Bytes per element: dtype_bytes for stored activations, 4 for LSE and gradients.
  int element_bytes(Field field) const;
  Tokens row_bytes(Field field) const { return row_values(field) * element_bytes(field); }
  /// Bytes of a row's heads `heads` (the field's own heads; all: row_bytes).
  Tokens row_bytes(Field field, HeadRange heads) const {
    return static_cast<Tokens>(heads.count(heads_of(field))) * head_values(field) * element_bytes(field);
  }
  /// Bytes of a slice of a buffer of `field`: rows * its heads * head_dim (1 for LSE) * element bytes.
  Tokens bytes(Field field, const Slice& slice) const { return slice.rows * row_bytes(field, slice.heads); }
  /// The heads of `field` that work over q heads `q` reads or writes, normalised (all when every head):
  /// `q` itself for q-side fields, the kv heads those q heads read (kv_heads_read) for K/V-side ones.
  HeadRange field_heads(Field field, HeadRange q) const;
  friend bool operator==(const HeadLayout&, const HeadLayout&) = default;
};

/// How a buffer's rows start: given by the caller (the rank's own Q, K, V, dO, ...), zero, -inf (LSE
/// of rows no task sees), or undefined until an instruction writes them.
enum class BufferInit : std::uint8_t { kInput, kZero, kNegInf, kUndefined };
const char* to_string(BufferInit init);
BufferInit parse_buffer_init(std::string_view text);

struct Buffer {
  std::string name;
  Field field = Field::kQ;
  Tokens rows = 0;
  BufferInit init = BufferInit::kUndefined;
  bool output = false;  // the caller reads it after the pass (O and LSE, or dQ, dK and dV)
  friend bool operator==(const Buffer&, const Buffer&) = default;
};

/// One point-to-point message: a send of `slice` to `peer`, or a receive from `peer` into `slice`.
/// A send and its receive carry the same tag and the same byte count.
struct Message {
  int peer = 0;
  int tag = 0;
  Slice slice;
  friend bool operator==(const Message&, const Message&) = default;
};

/// What a launch moves: inputs to attention servers, or results back to the tokens' owners.
enum class CommKind : std::uint8_t { kDispatch, kReturn };
const char* to_string(CommKind kind);
CommKind parse_comm_kind(std::string_view text);

/// The order of `sends` and `receives` is part of the plan: it is the **posting order**. MPI and gloo match a
/// message by (source, tag), but NCCL pairs the k-th send rank s posts to rank d with the k-th receive d posts
/// from s, whatever their tags. An executor over NCCL (fulcrum.torch) posts, per launch and per peer, one
/// send: the launch's sends to that peer packed back to back in list order, and one receive: its receives
/// from that peer, likewise. So for every ordered pair of ranks (s, d) the plan must give, as a sequence of
/// postings:
///   s's launches that send to d, in program order, each with the tags of its sends to d in list order,
///   d's launches that receive from s, in program order, each with the tags of its receives from s in
///   list order,
/// and the two sequences must be equal: the k-th posting of each side carries the same tags in the same
/// order (and so the same bytes, as a send and the receive of its tag have one size). `compile` emits every
/// plan so; verify_plan checks it (posting_order_errors). The C++ executor's communicators match by tag and
/// do not need it.
struct CommLaunch {
  int id = 0;                     // unique within the program; named by the CommWait that completes it
  std::vector<Message> sends;     // in posting order (above)
  std::vector<Message> receives;  // in posting order (above)
  CommKind kind = CommKind::kDispatch;
  friend bool operator==(const CommLaunch&, const CommLaunch&) = default;
};

struct CommWait {
  int launch = 0;
  friend bool operator==(const CommWait&, const CommWait&) = default;
};

/// One CA-task inside a fused call: query rows (one span or a head+tail pair) of document `doc` (an
/// index into Plan::documents) against one span of key rows, for q heads `heads` (default all), each
/// head masked by its own mask (PlanDocument::mask_of). Buffer rows stay full width: heads outside
/// the range are neither read nor written by the item.
struct AttentionItem {
  int doc = 0;
  std::array<RowSpan, 2> queries{};  // the second has count 0 for a single span
  RowSpan keys;
  HeadRange heads{};
  friend bool operator==(const AttentionItem&, const AttentionItem&) = default;
};

/// Forward: writes o and lse for every item's query rows. Fields are buffer indices.
struct Attention {
  int q = 0, k = 0, v = 0, o = 0, lse = 0;
  std::vector<AttentionItem> items;
  friend bool operator==(const Attention&, const Attention&) = default;
};

/// Backward: adds into dq, dk and dv, given the forward's (merged) o and lse and the output gradient.
struct AttentionBackward {
  int q = 0, k = 0, v = 0, o = 0, lse = 0, d_o = 0, dq = 0, dk = 0, dv = 0;
  std::vector<AttentionItem> items;
  friend bool operator==(const AttentionBackward&, const AttentionBackward&) = default;
};

/// kMerge: out/out_lse = the LSE-weighted merge of parts/part_lse (partial attention over split keys).
/// kSum: out += the sum of parts (gradients from several servers); out_lse and part_lse unused.
enum class ReduceOp : std::uint8_t { kMerge, kSum };
struct Reduce {
  ReduceOp op = ReduceOp::kSum;
  Slice out;
  Slice out_lse;
  std::vector<Slice> parts;
  std::vector<Slice> part_lse;
  friend bool operator==(const Reduce&, const Reduce&) = default;
};

/// dst = src (same field and row count).
struct Copy {
  Slice src;
  Slice dst;
  friend bool operator==(const Copy&, const Copy&) = default;
};

using Operation = std::variant<CommLaunch, CommWait, Attention, AttentionBackward, Reduce, Copy>;
const char* operation_name(const Operation& op);

struct Instruction {
  Operation op;
  int stream = 0;  // the nano-batch it belongs to, in [0, Plan::nano_batches)
  friend bool operator==(const Instruction&, const Instruction&) = default;
};

/// Rows [row, row + tokens.size()) of the rank's input buffers hold tokens `tokens` of document `doc`.
struct OwnedRows {
  int doc = 0;
  Range tokens;
  Tokens row = 0;
  friend bool operator==(const OwnedRows&, const OwnedRows&) = default;
};

struct Program {
  int rank = 0;
  std::vector<OwnedRows> owned;  // the rank's tokens, in the row order of its input/output buffers
  std::vector<Buffer> buffers;
  std::vector<Instruction> instructions;

  Tokens owned_tokens() const;
  /// The index of the buffer called `name`, or -1.
  int find_buffer(std::string_view name) const;
  friend bool operator==(const Program&, const Program&) = default;
};

enum class Pass : std::uint8_t { kForward, kBackward };
const char* to_string(Pass pass);
Pass parse_pass(std::string_view text);

struct PlanDocument {
  Tokens length = 0;
  MaskSpec mask;
  std::vector<MaskSpec> head_masks{};  // empty: `mask` for every q head; else one per q head

  const MaskSpec& mask_of(int head) const {
    return head_masks.empty() ? mask : head_masks[static_cast<std::size_t>(head)];
  }
  friend bool operator==(const PlanDocument& a, const PlanDocument& b) {
    if (a.length != b.length || a.mask.to_string() != b.mask.to_string() ||
        a.head_masks.size() != b.head_masks.size()) {
      return false;
    }
    for (std::size_t h = 0; h < a.head_masks.size(); ++h) {
      if (a.head_masks[h].to_string() != b.head_masks[h].to_string()) return false;
    }
    return true;
  }
};

struct Plan {
  Pass pass = Pass::kForward;
  std::string planner;  // the planner that made the Assignment
  CommMode mode = CommMode::kPingPong;
  int nano_batches = 2;  // ordered nano-batches: 1 single-stream, 2 halves, or the planner's divisions
  HeadLayout heads;
  std::vector<PlanDocument> documents;
  std::vector<Program> programs;  // one per rank, programs[r].rank == r

  int ranks() const { return static_cast<int>(programs.size()); }
  friend bool operator==(const Plan&, const Plan&) = default;
};

/// Names of the buffers every program declares: the caller's inputs and outputs.
namespace buffer_names {
inline constexpr std::string_view kQ = "q", kK = "k", kV = "v", kO = "o", kLse = "lse", kDO = "d_o", kDQ = "dq",
                                  kDK = "dk", kDV = "dv";
}

}  // namespace fulcrum
