// compile for ring Assignments (Assignment::ring_node_ranks > 0): context-parallel ring attention as an
// ordered Program per rank. Every rank keeps its queries; the K/V of every rank travels the ring, and a
// rank computes, at each step, its tasks over the keys it holds at that step.
//
// Nodes of L ranks (rank = node·L + local), Nn nodes. Outer step o, inner step i: rank r holds the K/V
// of source ((node − o) mod Nn)·L + ((local − i) mod L). At o's start it posts the inter-node send of
// the K/V it held when o began to the same local rank of the next node (and the receive from the
// previous node); each inner step posts the intra-node send of the K/V it computes on to the next
// local rank, computes, and waits; the outer transfer is waited after the inner loop, so it hides
// behind L inner steps. Two buffers per level alternate (double buffering): the receive of step t + 1
// lands in the buffer step t − 1 computed on. A flat ring is one node of W ranks.
//
// Forward: each step writes O and LSE of the rows it computes into the step's own partial buffers; at
// the end each stretch of rows merges, by LSE, the steps that computed it.
// Backward: each step adds dQ into the rank's dQ and writes its dK/dV into fresh step buffers. The
// accumulator of the K/V block travels the inner ring with it: a step waits for the accumulator from
// the previous local rank (sent after that rank's compute, so the transfer hides behind this step's
// compute), adds its own part and sends it on. After the inner loop the node's accumulator goes to the
// block's owner directly, which sums the Nn node parts into dK/dV at the end. (The published system
// passes accumulators along the outer ring too; sending each node's part home costs the same bytes
// per block, and its transfers hide behind the following outer steps.)
//
// Steps are the Plan's nano-batches: `Instruction::stream` is the step (o·L + i), so timelines and
// traces show one row per step.
#include "fulcrum/plan/compile_ring.hpp"
#include "fulcrum/core/error.hpp"
#include "fulcrum/plan/compile_layout.hpp"
#include "fulcrum/workload/head_masks.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace fulcrum {
namespace {

using compile_detail::OwnerMap;

// Launch ids within a step (a step's launches are id = step * 4 + kind).
enum LaunchKind { kOuterKv = 0, kInnerKv = 1, kAccumulator = 2 };

class RingCompiler {
 public:
  RingCompiler(const Assignment& a, const HeadLayout& heads, Pass pass, CommMode mode)
      : a_(a), pass_(pass), owners_(a.batch), ranks_(a.batch.ranks), node_ranks_(a.ring_node_ranks) {
    if (ranks_ % node_ranks_ != 0) {
      fail("ring of {} ranks over machines of {} ranks: the ranks must fill whole machines", ranks_, node_ranks_);
    }
    nodes_ = ranks_ / node_ranks_;
    plan_.pass = pass;
    plan_.planner = a.planner;
    plan_.mode = mode;
    plan_.heads = heads;
    plan_.nano_batches = ranks_;
    for (std::size_t i = 0; i < a.batch.documents.size(); ++i) {
      const auto& d = a.batch.documents[i];
      validate_head_masks(d.head_masks, heads.q_heads, fmt::format("documents[{}].head_masks", i));
      plan_.documents.push_back({d.length, d.mask, d.head_masks});
    }
    rows_.resize(static_cast<std::size_t>(ranks_));
    for (int r = 0; r < ranks_; ++r) {
      for (const auto& o : owners_.owned_rows(r)) rows_[r] += o.tokens.size();
      max_rows_ = std::max(max_rows_, rows_[r]);
    }
    place_items();
  }

  Plan run() {
    programs_.resize(static_cast<std::size_t>(ranks_));
    for (int r = 0; r < ranks_; ++r) start_program(r);
    for (int o = 0; o < nodes_; ++o) {
      for (int i = 0; i < node_ranks_; ++i) step(o, i);
      for (int r = 0; r < ranks_; ++r) {
        if (nodes_ > 1 && o + 1 < nodes_) emit(r, CommWait{launch_id(o, 0, kOuterKv)}, step_of(o, node_ranks_ - 1));
      }
    }
    for (int r = 0; r < ranks_; ++r) finish_program(r);
    for (auto& p : programs_) plan_.programs.push_back(drop_empty_launches(std::move(p)));
    return std::move(plan_);
  }

 private:
  // A pair of buffers (O and LSE, or dK and dV; -1: none yet) and the rows of them that hold results.
  struct Part {
    std::array<int, 2> buffers{-1, -1};
    RangeSet rows;
    bool present() const { return buffers[0] >= 0; }
  };
  // One fused call: items whose query rows are disjoint (the kernels' one writer per output row).
  struct Call {
    std::vector<AttentionItem> items;
    RangeSet rows;  // query rows written
  };
  struct RankState {
    Program program;
    std::map<Field, int> own;
    int outer[2][2]{};                     // [buffer][k or v]: K/V received from the previous node
    int inner[2][2]{};                     // K/V received from the previous local rank
    int held[2]{};                         // K/V held at the current outer step's start
    int current[2]{};                      // K/V of the current step
    Part accumulator;                      // backward: this node's dK, dV of the current block
    std::vector<Part> node_parts;          // backward: each node's dK, dV of this rank's block
    std::vector<int> final_waits;          // backward: launches returning node parts
    std::vector<Part> parts;               // forward: O, LSE of every call
    std::map<int, std::size_t> launch_at;  // launch id -> instruction index
  };

  int node(int r) const { return r / node_ranks_; }
  int local(int r) const { return r % node_ranks_; }
  int rank_of(int n, int l) const {
    return ((n % nodes_ + nodes_) % nodes_) * node_ranks_ + (l % node_ranks_ + node_ranks_) % node_ranks_;
  }
  int source(int r, int o, int i) const { return rank_of(node(r) - o, local(r) - i); }
  int step_of(int o, int i) const { return o * node_ranks_ + i; }
  int launch_id(int o, int i, LaunchKind kind) const { return step_of(o, i) * 4 + kind; }
  bool forward() const { return pass_ == Pass::kForward; }

  // Each task becomes an item of its server's step that holds its keys' rank.
  void place_items() {
    calls_.assign(static_cast<std::size_t>(ranks_) * ranks_, {});
    keys_read_.assign(calls_.size(), {});
    for (std::size_t n = 0; n < a_.tasks.size(); ++n) {
      const CATask& t = a_.tasks[n];
      FULCRUM_CHECK(t.heads.all(), "ring task {} covers heads [{}, {}): ring schedules run every head", n,
                    t.heads.begin, t.heads.end);
      const auto key_pieces = owners_.pieces(t.doc, t.keys);
      FULCRUM_CHECK(key_pieces.size() == 1, "ring task {}: its keys [{}, {}) of document {} are not held by one rank",
                    n, t.keys.begin, t.keys.end, t.doc);
      const auto& keys = key_pieces.front();
      AttentionItem item{.doc = t.doc, .queries = {}, .keys = {keys.row, t.keys.begin, t.keys.size()}, .heads = {}};
      const auto& doc = a_.batch.documents[t.doc];
      const auto runs = mask_runs(doc.mask, doc.head_masks, t.heads);
      const std::size_t cell = static_cast<std::size_t>(t.server) * ranks_ + keys.rank;
      int span = 0;
      RangeSet written;
      for (const auto& q : t.query_ranges()) {
        const auto rows = owners_.pieces(t.doc, q);
        FULCRUM_CHECK(rows.size() == 1 && rows.front().rank == t.server,
                      "ring task {}: rows [{}, {}) of document {} are not held by its server {}", n, q.begin, q.end,
                      t.doc, t.server);
        item.queries[span++] = {rows.front().row, q.begin, q.size()};
        written.add({rows.front().row, rows.front().row + q.size()});
        for (const auto& needed : keys_needed(runs, q, t.keys, doc.length)) {
          const Tokens row = keys.row + (needed.begin - t.keys.begin);
          keys_read_[cell].add({row, row + needed.size()});
        }
      }
      add_to_call(calls_[cell], item, written);
    }
  }
  // Puts an item into the first call of its step that writes none of its rows, or a new call.
  static void add_to_call(std::vector<Call>& calls, const AttentionItem& item, const RangeSet& written) {
    auto disjoint = [&](const Call& c) {
      for (const auto& range : written.ranges()) {
        if (c.rows.count_missing(range) != range.size()) return false;
      }
      return true;
    };
    auto it = std::find_if(calls.begin(), calls.end(), disjoint);
    if (it == calls.end()) it = calls.insert(calls.end(), Call{});
    it->items.push_back(item);
    for (const auto& range : written.ranges()) it->rows.add(range);
  }
  const std::vector<Call>& calls(int server, int src) const {
    return calls_[static_cast<std::size_t>(server) * ranks_ + src];
  }

  int add_buffer(int r, std::string name, Field field, Tokens rows, BufferInit init, bool output = false) {
    auto& buffers = programs_[r].program.buffers;
    buffers.push_back({std::move(name), field, rows, init, output});
    return static_cast<int>(buffers.size()) - 1;
  }
  void emit(int r, Operation op, int stream) {
    auto& p = programs_[r];
    if (const auto* l = std::get_if<CommLaunch>(&op)) p.launch_at[l->id] = p.program.instructions.size();
    p.program.instructions.push_back({std::move(op), stream});
  }
  CommLaunch& launch(int r, int id) {
    auto& p = programs_[r];
    return std::get<CommLaunch>(p.program.instructions[p.launch_at.at(id)].op);
  }
  // Rows [0, rows) of `from` on rank src go to rows [0, rows) of `to` on rank dst, in launch `id` of both.
  void move(int id, int src, int from, int dst, int to, Tokens rows) {
    const int tag = next_tag_[{src, dst}]++;
    launch(src, id).sends.push_back({dst, tag, {from, 0, rows, {}}});
    launch(dst, id).receives.push_back({src, tag, {to, 0, rows, {}}});
  }

  void start_program(int r) {
    auto& s = programs_[r];
    s.program.rank = r;
    s.program.owned = owners_.owned_rows(r);
    const Tokens n = rows_[r];
    const std::vector<Field> inputs =
        forward() ? std::vector<Field>{Field::kQ, Field::kK, Field::kV}
                  : std::vector<Field>{Field::kQ, Field::kK, Field::kV, Field::kO, Field::kLse, Field::kDO};
    for (Field f : inputs) s.own[f] = add_buffer(r, to_string(f), f, n, BufferInit::kInput);
    if (forward()) {
      s.own[Field::kO] = add_buffer(r, "o", Field::kO, n, BufferInit::kZero, true);
      s.own[Field::kLse] = add_buffer(r, "lse", Field::kLse, n, BufferInit::kNegInf, true);
    } else {
      for (Field f : {Field::kDQ, Field::kDK, Field::kDV})
        s.own[f] = add_buffer(r, to_string(f), f, n, BufferInit::kZero, true);
    }
    const Field kv[2] = {Field::kK, Field::kV};
    for (int b = 0; b < 2; ++b) {
      for (int f = 0; f < 2; ++f) {
        if (nodes_ > 1)
          s.outer[b][f] = add_buffer(r, fmt::format("ring_outer{}_{}", b, to_string(kv[f])), kv[f], max_rows_,
                                     BufferInit::kUndefined);
        if (node_ranks_ > 1)
          s.inner[b][f] = add_buffer(r, fmt::format("ring_inner{}_{}", b, to_string(kv[f])), kv[f], max_rows_,
                                     BufferInit::kUndefined);
      }
    }
  }

  void step(int o, int i) {
    const int t = step_of(o, i);
    // Launches first on every rank, so that both ends of each message exist.
    for (int r = 0; r < ranks_; ++r) {
      auto& s = programs_[r];
      if (i == 0) {
        for (int f = 0; f < 2; ++f)
          s.held[f] = o == 0 ? s.own[f == 0 ? Field::kK : Field::kV] : s.outer[(o - 1) % 2][f];
        if (nodes_ > 1 && o + 1 < nodes_)
          emit(r, CommLaunch{.id = launch_id(o, 0, kOuterKv), .sends = {}, .receives = {}, .kind = CommKind::kDispatch},
               t);
      }
      for (int f = 0; f < 2; ++f) s.current[f] = i == 0 ? s.held[f] : s.inner[(i - 1) % 2][f];
      if (i + 1 < node_ranks_)
        emit(r, CommLaunch{.id = launch_id(o, i, kInnerKv), .sends = {}, .receives = {}, .kind = CommKind::kDispatch},
             t);
    }
    for (int r = 0; r < ranks_; ++r) {
      const auto& s = programs_[r];
      if (i == 0 && nodes_ > 1 && o + 1 < nodes_) {
        const int next = rank_of(node(r) + 1, local(r));
        for (int f = 0; f < 2; ++f)
          move(launch_id(o, 0, kOuterKv), r, s.held[f], next, programs_[next].outer[o % 2][f], rows_[source(r, o, 0)]);
      }
      if (i + 1 < node_ranks_) {
        const int next = rank_of(node(r), local(r) + 1);
        for (int f = 0; f < 2; ++f)
          move(launch_id(o, i, kInnerKv), r, s.current[f], next, programs_[next].inner[i % 2][f],
               rows_[source(r, o, i)]);
      }
    }
    if (forward()) {
      for (int r = 0; r < ranks_; ++r) forward_compute(r, o, i);
    } else {
      backward_step(o, i);
    }
    for (int r = 0; r < ranks_; ++r) {
      if (i + 1 < node_ranks_) emit(r, CommWait{launch_id(o, i, kInnerKv)}, t);
    }
  }

  void forward_compute(int r, int o, int i) {
    auto& s = programs_[r];
    const int t = step_of(o, i);
    const auto& step_calls = calls(r, source(r, o, i));
    for (std::size_t c = 0; c < step_calls.size(); ++c) {
      Part part{
          .buffers = {add_buffer(r, fmt::format("o@step{}.{}", t, c), Field::kO, rows_[r], BufferInit::kZero),
                      add_buffer(r, fmt::format("lse@step{}.{}", t, c), Field::kLse, rows_[r], BufferInit::kNegInf)},
          .rows = step_calls[c].rows};
      emit(r,
           Attention{.q = s.own[Field::kQ],
                     .k = s.current[0],
                     .v = s.current[1],
                     .o = part.buffers[0],
                     .lse = part.buffers[1],
                     .items = step_calls[c].items},
           t);
      s.parts.push_back(std::move(part));
    }
  }

  void backward_step(int o, int i) {
    const int t = step_of(o, i);
    const bool last_inner = i + 1 == node_ranks_;
    for (int r = 0; r < ranks_; ++r) {
      auto& s = programs_[r];
      const int src = source(r, o, i);
      const auto& step_calls = calls(r, src);
      Part mine;
      if (!step_calls.empty()) {
        mine.buffers = {add_buffer(r, fmt::format("dk@step{}", t), Field::kDK, max_rows_, BufferInit::kZero),
                        add_buffer(r, fmt::format("dv@step{}", t), Field::kDV, max_rows_, BufferInit::kZero)};
        mine.rows = keys_read(r, src);
        for (const auto& call : step_calls) {
          emit(r,
               AttentionBackward{.q = s.own[Field::kQ],
                                 .k = s.current[0],
                                 .v = s.current[1],
                                 .o = s.own[Field::kO],
                                 .lse = s.own[Field::kLse],
                                 .d_o = s.own[Field::kDO],
                                 .dq = s.own[Field::kDQ],
                                 .dk = mine.buffers[0],
                                 .dv = mine.buffers[1],
                                 .items = call.items},
               t);
        }
      }
      // Fold this step's part into the accumulator that came from the previous local rank.
      if (i > 0) emit(r, CommWait{launch_id(o, i - 1, kAccumulator)}, t);
      Part& acc = s.accumulator;
      if (i == 0 || !acc.present()) {
        acc = mine;
      } else if (mine.present()) {
        for (int f = 0; f < 2; ++f) {
          emit_reduce(r, ReduceOp::kSum, {acc.buffers[f], -1},
                      {Part{.buffers = {mine.buffers[f], -1}, .rows = mine.rows}}, t);
        }
        for (const auto& range : mine.rows.ranges()) acc.rows.add(range);
      }
      emit(r,
           CommLaunch{.id = launch_id(o, i, kAccumulator),
                      .sends = {},
                      .receives = {},
                      .kind = last_inner ? CommKind::kReturn : CommKind::kDispatch},
           t);
    }
    // Pass each accumulator on to the next local rank, or after the inner loop home to the block's owner.
    std::vector<Part> arriving(static_cast<std::size_t>(ranks_));
    for (int r = 0; r < ranks_; ++r) {
      const Part& acc = programs_[r].accumulator;
      if (!acc.present()) continue;
      const int src = source(r, o, i);
      const int dst = last_inner ? src : rank_of(node(r), local(r) + 1);
      const Tokens rows = last_inner ? rows_[src] : max_rows_;
      Part& to = last_inner ? programs_[src].node_parts.emplace_back() : arriving[dst];
      to.rows = acc.rows;
      for (int f = 0; f < 2; ++f) {
        const Field field = f == 0 ? Field::kDK : Field::kDV;
        to.buffers[f] = add_buffer(
            dst, fmt::format("{}@{}{}", to_string(field), last_inner ? "node_part" : "step", last_inner ? o : t + 1),
            field, rows, BufferInit::kUndefined);
        if (dst == r) {
          emit(r, Copy{{acc.buffers[f], 0, rows_[src], {}}, {to.buffers[f], 0, rows_[src], {}}}, t);
        } else {
          move(launch_id(o, i, kAccumulator), r, acc.buffers[f], dst, to.buffers[f], rows_[src]);
        }
      }
    }
    for (int r = 0; r < ranks_; ++r) {
      programs_[r].accumulator = last_inner ? Part{} : arriving[r];
      if (last_inner) programs_[r].final_waits.push_back(launch_id(o, i, kAccumulator));
    }
  }

  // Forward: each stretch of rows merges the steps that computed it. Backward: dK, dV sum the node parts.
  void finish_program(int r) {
    auto& s = programs_[r];
    const int t = ranks_ - 1;
    for (int id : s.final_waits) emit(r, CommWait{id}, t);
    if (forward()) {
      emit_reduce(r, ReduceOp::kMerge, {s.own[Field::kO], s.own[Field::kLse]}, s.parts, t);
    } else {
      for (int f = 0; f < 2; ++f) {
        std::vector<Part> parts;
        for (const auto& p : s.node_parts) parts.push_back({.buffers = {p.buffers[f], -1}, .rows = p.rows});
        emit_reduce(r, ReduceOp::kSum, {s.own[f == 0 ? Field::kDK : Field::kDV], -1}, parts, t);
      }
    }
  }

  // Reduces into `out` (and `out[1]`, the LSE, for a merge) every part over the rows it holds results
  // for: rows are cut where any part's rows start or end, and each stretch reduces the parts covering it.
  void emit_reduce(int r, ReduceOp op, std::array<int, 2> out, const std::vector<Part>& parts, int stream) {
    std::vector<Tokens> cuts;
    for (const auto& part : parts) {
      for (const auto& range : part.rows.ranges()) {
        cuts.push_back(range.begin);
        cuts.push_back(range.end);
      }
    }
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    for (std::size_t c = 0; c + 1 < cuts.size(); ++c) {
      const Range stretch{cuts[c], cuts[c + 1]};
      Reduce reduce{
          .op = op, .out = {out[0], stretch.begin, stretch.size(), {}}, .out_lse = {}, .parts = {}, .part_lse = {}};
      if (op == ReduceOp::kMerge) reduce.out_lse = {out[1], stretch.begin, stretch.size(), {}};
      for (const auto& part : parts) {
        if (!part.rows.covers(stretch)) continue;
        reduce.parts.push_back({part.buffers[0], stretch.begin, stretch.size(), {}});
        if (op == ReduceOp::kMerge) reduce.part_lse.push_back({part.buffers[1], stretch.begin, stretch.size(), {}});
      }
      if (!reduce.parts.empty()) emit(r, std::move(reduce), stream);
    }
  }

  // Rows of `src` that rank r's items read (every key some query of an item sees, as the verifier asks).
  const RangeSet& keys_read(int r, int src) const { return keys_read_[static_cast<std::size_t>(r) * ranks_ + src]; }

  static Program drop_empty_launches(RankState state) {
    Program p = std::move(state.program);
    std::vector<int> empty;
    for (const auto& in : p.instructions) {
      if (const auto* l = std::get_if<CommLaunch>(&in.op); l && l->sends.empty() && l->receives.empty())
        empty.push_back(l->id);
    }
    std::erase_if(p.instructions, [&](const Instruction& in) {
      int id = -1;
      if (const auto* l = std::get_if<CommLaunch>(&in.op)) id = l->id;
      if (const auto* w = std::get_if<CommWait>(&in.op)) id = w->launch;
      return id >= 0 && std::find(empty.begin(), empty.end(), id) != empty.end();
    });
    return p;
  }

  const Assignment& a_;
  Pass pass_;
  OwnerMap owners_;
  int ranks_;
  int node_ranks_;
  int nodes_ = 1;
  Plan plan_;
  std::vector<Tokens> rows_;  // rows each rank owns
  Tokens max_rows_ = 0;
  std::vector<std::vector<Call>> calls_;  // [server * ranks + key owner]
  std::vector<RangeSet> keys_read_;       // [server * ranks + key owner]: key rows read
  std::vector<RankState> programs_;
  std::map<std::pair<int, int>, int> next_tag_;
};

}  // namespace

Plan compile_ring(const Assignment& assignment, const HeadLayout& heads, Pass pass, CommMode mode) {
  return RingCompiler(assignment, heads, pass, mode).run();
}

}  // namespace fulcrum
