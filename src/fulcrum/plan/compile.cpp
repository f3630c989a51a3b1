#include "fulcrum/plan/compile.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/cost/attention_cost.hpp"
#include "fulcrum/plan/compile_layout.hpp"
#include "fulcrum/plan/compile_ring.hpp"
#include "fulcrum/workload/head_masks.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>

namespace fulcrum {
namespace {

using compile_detail::OwnerMap;
using compile_detail::RankBuilder;

// The fields each side of a task moves, per pass.
struct PassFields {
  std::vector<Field> q_in, q_out, kv_in, kv_out;
};

PassFields pass_fields(Pass pass) {
  if (pass == Pass::kForward) return {{Field::kQ}, {Field::kO, Field::kLse}, {Field::kK, Field::kV}, {}};
  return {
      {Field::kQ, Field::kO, Field::kLse, Field::kDO}, {Field::kDQ}, {Field::kK, Field::kV}, {Field::kDK, Field::kDV}};
}

// A slice of workspace rows that holds an output for tokens `tokens` of `doc`, to be returned to the
// tokens' owners: O+LSE or dQ of a task's query range, dK+dV of fetched keys; for heads `heads` of the
// side (q heads of O, LSE, dQ; kv heads of dK, dV), the heads its task computed.
struct Contribution {
  int server = 0;
  int nano_batch = 0;
  int slot = 0;  // the server's workspace holding it
  int doc = 0;
  Range tokens;
  Tokens ws_row = 0;
  bool q_side = true;
  HeadRange heads{};
};

// One fused call: the tasks of a server's nano-batch that need traffic (remote) or not (local).
struct TaskGroup {
  int nano_batch = 0;
  bool local = false;
  std::vector<int> tasks;
};

class Compiler {
 public:
  Compiler(const Assignment& a, const HeadLayout& heads, Pass pass, CommMode mode)
      : a_(a), pass_(pass), pingpong_(overlaps(mode)), fields_(pass_fields(pass)), owners_(a.batch) {
    plan_.pass = pass;
    plan_.planner = a.planner;
    plan_.mode = mode;
    plan_.heads = heads;
    for (std::size_t i = 0; i < a.batch.documents.size(); ++i) {
      const auto& d = a.batch.documents[i];
      validate_head_masks(d.head_masks, heads.q_heads, fmt::format("documents[{}].head_masks", i));
      check_mask_lengths(d.mask, d.head_masks, d.length, fmt::format("documents[{}]", i));
      plan_.documents.push_back({d.length, d.mask, d.head_masks});
    }
    for (std::size_t i = 0; i < a.tasks.size(); ++i) {
      validate_head_range(a.tasks[i].heads, heads.q_heads, fmt::format("tasks[{}].heads", i));
    }
    nano_batches_ = pingpong_ ? 2 : 1;
    if (pingpong_ && !a.tasks.empty() && a.tasks.front().division >= 0) {
      nano_batches_ = 0;
      for (const auto& t : a.tasks) {
        if (t.division < 0)
          fail("task of document {} has division = {}: all tasks or none must have one", t.doc, t.division);
        nano_batches_ = std::max(nano_batches_, t.division + 1);
      }
    }
    for (int r = 0; r < a.batch.ranks; ++r) ranks_.emplace_back(r, owners_, pass, nano_batches_, heads.kv_heads);
    tags_.assign(static_cast<std::size_t>(a.batch.ranks) * a.batch.ranks, 0);
    for (const auto& t : a.tasks) {
      if (pingpong_) {
        split_at_held_keys(t);
      } else {
        tasks_.push_back(t);
      }
    }
  }

  Plan run() {
    for (int server = 0; server < a_.batch.ranks; ++server) {
      const auto groups = group_tasks(server);
      for (const auto& group : groups) {
        const int slot = compile_detail::workspace_slot(group.nano_batch, group.local);
        for (int i : group.tasks) ranks_[server].reserve_keys(slot, tasks_[i].doc, tasks_[i].keys);
      }
      ranks_[server].allocate_key_blocks();
      for (const auto& group : groups) lay_out_group(server, group);
    }
    emit_returns();
    for (auto& r : ranks_) plan_.programs.push_back(r.finish());
    plan_.nano_batches = nano_batches_;
    return std::move(plan_);
  }

 private:
  int nano_batches() const { return nano_batches_; }
  bool planned_divisions() const { return !tasks_.empty() && tasks_.front().division >= 0 && nano_batches_ > 1; }

  // Ping-pong: a task whose rows its server owns, and which reads some keys the server holds and some
  // it does not, becomes one task per stretch of its keys cut at the server's own tokens. The part
  // over the server's own keys needs no traffic, so it runs while the rest of the keys arrive (DCP's
  // "blocks needing no traffic first"); the owner merges the parts as it merges any split keys.
  void split_at_held_keys(const CATask& t) {
    const auto runs = runs_of(t);
    bool rows_held = true;
    for (const auto& q : t.query_ranges()) rows_held = rows_held && owners_.owned_by(t.doc, q, t.server);
    std::vector<Tokens> cuts = {t.keys.begin, t.keys.end};
    for (const auto& piece : owners_.pieces(t.doc, t.keys)) {
      if (piece.rank == t.server) {
        cuts.push_back(piece.tokens.begin);
        cuts.push_back(piece.tokens.end);
      }
    }
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    if (!rows_held || cuts.size() <= 2) {
      tasks_.push_back(t);
      return;
    }
    const std::size_t first = tasks_.size();
    for (std::size_t i = 0; i + 1 < cuts.size(); ++i) {
      CATask part = t;
      part.keys = {cuts[i], cuts[i + 1]};
      // A stretch no row can see adds nothing (asked as the planners and the verifier ask: index-list
      // masks by their causal hull).
      bool seen = false;
      for (const auto& q : part.query_ranges()) seen = seen || !keys_needed(runs, q, part.keys, length_of(t)).empty();
      if (seen) tasks_.push_back(part);
    }
    if (tasks_.size() == first) tasks_.push_back(t);  // rows that see no key still get O = 0, LSE = -inf
  }

  // A task is local when its server owns every Q row and every key it reads, and so every output row.
  bool is_local(const CATask& t) const {
    const auto runs = runs_of(t);
    for (const auto& q : t.query_ranges()) {
      if (!owners_.owned_by(t.doc, q, t.server)) return false;
      for (const auto& keys : keys_needed(runs, q, t.keys, length_of(t))) {
        if (!owners_.owned_by(t.doc, keys, t.server)) return false;
      }
    }
    return true;
  }

  // A task's heads as runs under one mask each (one run for all-head tasks over one mask).
  std::vector<MaskRun> runs_of(const CATask& t) const {
    const auto& doc = a_.batch.documents[t.doc];
    return mask_runs(doc.mask, doc.head_masks, t.heads);
  }
  Tokens length_of(const CATask& t) const { return a_.batch.documents[t.doc].length; }

  // Work of a task in (head, query, key) triples: every task's pairs times q_heads for all-head
  // tasks, so the halves cut where they did before tasks had heads. In double: heads x a document's pairs
  // (up to 2^60) and a server's sum of them exceed 64 bits; below 2^53 the sums are exact, as before.
  double task_pairs(const CATask& t) const {
    double pairs = 0;
    for (const auto& run : runs_of(t)) {
      pairs += run.heads.count(plan_.heads.q_heads) *
               static_cast<double>(attention_pairs(*run.mask, t.query_ranges(), t.keys, length_of(t)));
    }
    return pairs;
  }

  // Splits one server's tasks into the schedule's groups, in execution order. Within local and remote
  // work, tasks are sorted by document so a cut between nano-batches splits at most one document's
  // K/V fetch in two.
  std::vector<TaskGroup> group_tasks(int server) const {
    std::vector<int> local, remote;
    for (int i = 0; i < static_cast<int>(tasks_.size()); ++i) {
      const auto& t = tasks_[i];
      if (t.server == server) (is_local(t) ? local : remote).push_back(i);
    }
    auto by_doc = [&](int x, int y) {
      const auto &tx = tasks_[x], &ty = tasks_[y];
      return std::tie(tx.doc, tx.queries[0].begin) < std::tie(ty.doc, ty.queries[0].begin);
    };
    std::sort(local.begin(), local.end(), by_doc);
    std::sort(remote.begin(), remote.end(), by_doc);
    if (nano_batches() == 1) {
      std::vector<int> all = local;
      all.insert(all.end(), remote.begin(), remote.end());
      return {{0, false, all}};
    }
    if (planned_divisions()) {
      std::vector<TaskGroup> groups;
      for (int d = 0; d < nano_batches(); ++d) {
        for (bool is_local : {true, false}) {
          TaskGroup g{d, is_local, {}};
          for (int i : is_local ? local : remote) {
            if (tasks_[i].division == d) g.tasks.push_back(i);
          }
          groups.push_back(std::move(g));
        }
      }
      return groups;
    }
    auto [local0, local1] = halve(local);
    auto [remote0, remote1] = halve(remote);
    return {{0, true, local0}, {0, false, remote0}, {1, false, remote1}, {1, true, local1}};
  }

  // Cuts tasks (in order) where the running work first reaches half the total.
  std::pair<std::vector<int>, std::vector<int>> halve(const std::vector<int>& tasks) const {
    double total = 0;
    for (int i : tasks) total += task_pairs(tasks_[i]);
    std::pair<std::vector<int>, std::vector<int>> halves;
    double running = 0;
    for (int i : tasks) {
      const double pairs = task_pairs(tasks_[i]);
      // A task goes first when most of it lies before the midpoint.
      (2 * running + pairs <= total ? halves.first : halves.second).push_back(i);
      running += pairs;
    }
    return halves;
  }

  int next_tag(int src, int dst) { return tags_[static_cast<std::size_t>(src) * a_.batch.ranks + dst]++; }

  // Moves heads `heads` (of the fields' side) of tokens `tokens` of `doc` of every field in `fields` from
  // their owners' input buffers into rows starting at `ws_row` of the server's workspace: a copy where
  // the server owns them, else a message in the nano-batch's dispatch launch.
  void fetch(int server, int nb, int slot, int doc, Range tokens, Tokens ws_row, const std::vector<Field>& fields,
             HeadRange heads) {
    for (const auto& piece : owners_.pieces(doc, tokens)) {
      const Tokens dst_row = ws_row + (piece.tokens.begin - tokens.begin);
      for (Field f : fields) {
        const Slice src{ranks_[piece.rank].own(f), piece.row, piece.tokens.size(), heads};
        const Slice dst{ranks_[server].workspace(slot, f), dst_row, piece.tokens.size(), heads};
        if (piece.rank == server) {
          ranks_[server].dispatch_copy(nb, {src, dst});
        } else {
          const int tag = next_tag(piece.rank, server);
          ranks_[piece.rank].dispatch(nb).sends.push_back({server, tag, src});
          ranks_[server].dispatch(nb).receives.push_back({piece.rank, tag, dst});
        }
      }
    }
  }

  void lay_out_group(int server, const TaskGroup& group) {
    if (group.tasks.empty()) return;
    RankBuilder& rank = ranks_[server];
    const int nb = group.nano_batch;
    const int slot = compile_detail::workspace_slot(nb, group.local);
    std::vector<AttentionItem> items;
    for (int i : group.tasks) {
      const auto& t = tasks_[i];
      const auto runs = runs_of(t);
      AttentionItem item;
      item.doc = t.doc;
      item.heads = t.heads;
      // Only the task's heads move: its q heads of the Q side, the kv heads they read of K/V.
      const HeadRange q_heads = plan_.heads.field_heads(Field::kQ, t.heads);
      const HeadRange kv_heads = plan_.heads.field_heads(Field::kK, t.heads);
      int span = 0;
      for (const auto& q : t.query_ranges()) {
        const Tokens row = rank.allocate_q_rows(slot, q.size());
        fetch(server, nb, slot, t.doc, q, row, fields_.q_in, q_heads);
        item.queries[span++] = {row, q.begin, q.size()};
        contributions_.push_back({server, nb, slot, t.doc, q, row, true, q_heads});
      }
      item.keys = {rank.key_row(slot, t.doc, t.keys.begin), t.keys.begin, t.keys.size()};
      for (const auto& q : t.query_ranges()) {
        for (const auto& needed : keys_needed(runs, q, t.keys, length_of(t))) {
          for (const auto& gap : rank.keys_missing(slot, t.doc, needed, kv_heads)) {
            const Tokens row = rank.key_row(slot, t.doc, gap.tokens.begin);
            fetch(server, nb, slot, t.doc, gap.tokens, row, fields_.kv_in, gap.heads);
            if (!fields_.kv_out.empty()) {
              contributions_.push_back({server, nb, slot, t.doc, gap.tokens, row, false, gap.heads});
            }
          }
        }
      }
      items.push_back(item);
    }
    rank.add_compute(slot, std::move(items));
  }

  // Returns every contribution to the owners of its tokens. A (row, head) that one contribution computed
  // gets it in place; one that several computed (split keys) gets a Reduce over all of them. Rows are cut
  // at every contribution edge and owner boundary, heads at every contribution's head edges (all-head
  // plans: whole rows only); per stretch a contribution returns its consecutive unshared heads as one
  // slice and each shared cell as one part of that cell's Reduce.
  void emit_returns() {
    std::map<std::pair<int, bool>, std::vector<const Contribution*>> by_doc;  // (doc, q side)
    for (const auto& c : contributions_) by_doc[{c.doc, c.q_side}].push_back(&c);
    for (const auto& [key, list] : by_doc) {
      const auto [doc, q_side] = key;
      const int width = q_side ? plan_.heads.q_heads : plan_.heads.kv_heads;
      // Elementary stretches: cut at every contribution edge and every owner boundary.
      std::vector<Tokens> cuts;
      std::vector<int> head_cuts = {0, width};
      for (const auto* c : list) {
        cuts.push_back(c->tokens.begin);
        cuts.push_back(c->tokens.end);
        head_cuts.push_back(c->heads.first());
        head_cuts.push_back(c->heads.last(width));
      }
      for (const auto& piece : owners_.pieces(doc, {0, a_.batch.documents[doc].length}))
        cuts.push_back(piece.tokens.begin);
      std::sort(cuts.begin(), cuts.end());
      cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
      std::sort(head_cuts.begin(), head_cuts.end());
      head_cuts.erase(std::unique(head_cuts.begin(), head_cuts.end()), head_cuts.end());
      const std::size_t cells = head_cuts.size() - 1;
      auto stretch_of = [&](Tokens t) {
        return static_cast<std::size_t>(std::lower_bound(cuts.begin(), cuts.end(), t) - cuts.begin());
      };
      auto cell_of = [&](int h) {
        return static_cast<std::size_t>(std::lower_bound(head_cuts.begin(), head_cuts.end(), h) - head_cuts.begin());
      };
      auto heads_of = [&](std::size_t j0, std::size_t j1) {
        return HeadRange{head_cuts[j0], head_cuts[j1]}.normalized(width);
      };
      std::vector<int> count(cuts.size() * cells, 0);  // contributions per (stretch, head cell)
      for (const auto* c : list) {
        for (auto i = stretch_of(c->tokens.begin); i < stretch_of(c->tokens.end); ++i) {
          for (auto j = cell_of(c->heads.first()); j < cell_of(c->heads.last(width)); ++j) ++count[i * cells + j];
        }
      }
      const auto& out_fields = q_side ? fields_.q_out : fields_.kv_out;
      const ReduceOp op = (pass_ == Pass::kForward && q_side) ? ReduceOp::kMerge : ReduceOp::kSum;
      // The owner-side Reduce of each shared cell, per reduced field: (stretch start, first head, field slot).
      std::map<std::tuple<Tokens, int, std::size_t>, Reduce> reduces;
      std::map<Tokens, int> reduce_owner;
      for (const auto* c : list) {
        const std::size_t j0 = cell_of(c->heads.first()), j1 = cell_of(c->heads.last(width));
        for (auto i = stretch_of(c->tokens.begin); i < stretch_of(c->tokens.end); ++i) {
          const Range stretch{cuts[i], cuts[i + 1]};
          const auto owner = owners_.pieces(doc, stretch).front();
          const Tokens ws_row = c->ws_row + (stretch.begin - c->tokens.begin);
          std::map<Field, Tokens> part_rows;  // this stretch's rows in the owner's part buffers
          std::size_t run = j0;               // the first head cell of a run of unshared ones
          for (std::size_t j = j0; j <= j1; ++j) {
            if (j < j1 && count[i * cells + j] == 1) continue;
            if (run < j) return_direct(*c, out_fields, stretch, ws_row, owner, heads_of(run, j));
            if (j < j1) {
              reduce_owner[stretch.begin] = owner.rank;
              return_part(*c, out_fields, stretch, ws_row, owner, heads_of(j, j + 1), op, part_rows, reduces);
            }
            run = j + 1;
          }
        }
      }
      for (auto& [at, r] : reduces) ranks_[reduce_owner[std::get<0>(at)]].add_reduce(std::move(r));
    }
  }

  void return_direct(const Contribution& c, const std::vector<Field>& fields, Range stretch, Tokens ws_row,
                     const OwnerMap::Piece& owner, HeadRange heads) {
    for (Field f : fields) {
      const Slice src{ranks_[c.server].workspace(c.slot, f), ws_row, stretch.size(), heads};
      const Slice dst{ranks_[owner.rank].own(f), owner.row, stretch.size(), heads};
      send_or_copy(c, owner.rank, src, dst);
    }
  }

  // One contribution to heads `heads` of a stretch that several contributions share: sent to (or, on
  // the owner, read in place from) a part slot, and added to that cell's Reduce. A merge reduces O and
  // LSE together; a sum reduces each gradient field on its own. The stretch's part rows are allocated
  // once per contribution and field (`part_rows`); each cell uses its own heads of them.
  void return_part(const Contribution& c, const std::vector<Field>& fields, Range stretch, Tokens ws_row,
                   const OwnerMap::Piece& owner, HeadRange heads, ReduceOp op, std::map<Field, Tokens>& part_rows,
                   std::map<std::tuple<Tokens, int, std::size_t>, Reduce>& reduces) {
    for (std::size_t j = 0; j < fields.size(); ++j) {
      const Field f = fields[j];
      Slice part{ranks_[c.server].workspace(c.slot, f), ws_row, stretch.size(), heads};
      if (c.server != owner.rank) {
        auto [row, fresh] = part_rows.try_emplace(f, 0);
        if (fresh) row->second = ranks_[owner.rank].allocate_part_rows(f, stretch.size());
        const Slice received{ranks_[owner.rank].part(f), row->second, stretch.size(), heads};
        send_or_copy(c, owner.rank, part, received);
        part = received;
      }
      const Slice out{ranks_[owner.rank].own(f), owner.row, stretch.size(), heads};
      Reduce& r = reduces[{stretch.begin, heads.first(), op == ReduceOp::kMerge ? 0 : j}];
      r.op = op;
      if (f == Field::kLse) {
        r.out_lse = out;
        r.part_lse.push_back(part);
      } else {
        r.out = out;
        r.parts.push_back(part);
      }
    }
  }

  void send_or_copy(const Contribution& c, int owner, const Slice& src, const Slice& dst) {
    if (c.server == owner) {
      ranks_[owner].return_copy({src, dst});
    } else {
      const int tag = next_tag(c.server, owner);
      ranks_[c.server].return_launch(c.nano_batch).sends.push_back({owner, tag, src});
      ranks_[owner].return_launch(c.nano_batch).receives.push_back({c.server, tag, dst});
    }
  }

  const Assignment& a_;
  Pass pass_;
  bool pingpong_;  // ordered nano-batches (pingpong and signal) rather than one stream
  int nano_batches_ = 1;
  PassFields fields_;
  OwnerMap owners_;
  Plan plan_;
  std::vector<RankBuilder> ranks_;
  std::vector<int> tags_;
  std::vector<CATask> tasks_;  // the Assignment's, ping-pong's split at held keys
  std::vector<Contribution> contributions_;
};

}  // namespace

HeadLayout head_layout(const ModelShape& model, int dtype_bytes) {
  model.validate();
  if (dtype_bytes != 2 && dtype_bytes != 4) fail("dtype_bytes = {}: must be 2 (bf16) or 4 (fp32)", dtype_bytes);
  return {model.q_heads, model.kv_heads, model.head_dim, dtype_bytes};
}

Plan compile(const Assignment& assignment, const HeadLayout& heads, Pass pass, CommMode mode) {
  if (assignment.ring_node_ranks > 0) return compile_ring(assignment, heads, pass, mode);
  return Compiler(assignment, heads, pass, mode).run();
}

}  // namespace fulcrum
