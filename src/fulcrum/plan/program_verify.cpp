#include "fulcrum/plan/program_verify.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/plan/program_labels.hpp"
#include "fulcrum/workload/head_masks.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace fulcrum {
namespace {

constexpr std::size_t kMaxErrors = 32;

// A head range over `width` heads: some of them, or all of them spelt one way, {0, -1} (HeadRange{}), so
// that a plan has one encoding (a decoded {0, -7} would mean "all" yet write differently).
bool heads_ok(HeadRange h, int width) {
  return h.all() ? h.begin == 0 && h.end == -1 : h.begin >= 0 && h.begin < h.end && h.end <= width;
}

Field operand_fields_forward[] = {Field::kQ, Field::kK, Field::kV, Field::kO, Field::kLse};
Field operand_fields_backward[] = {Field::kQ,  Field::kK,  Field::kV,  Field::kO, Field::kLse,
                                   Field::kDO, Field::kDQ, Field::kDK, Field::kDV};

class PlanChecker {
 public:
  PlanChecker(const Plan& plan, const Batch& batch) : plan_(plan), batch_(batch) {}

  VerifyReport run() {
    check_layout();
    if (!report_.ok()) return std::move(report_);  // head counts and sizes the remaining checks compute with
    check_documents();
    for (const auto& p : plan_.programs) check_structure(p);
    if (!report_.ok()) return std::move(report_);
    check_matching();
    if (!report_.ok()) return std::move(report_);
    for (auto& e : posting_order_errors(plan_)) error("{}", e);
    check_coverage();
    program_labels::Machine machine(plan_, report_.errors);
    simulate(machine);
    if (report_.ok()) machine.check_outputs();
    if (report_.errors.size() > kMaxErrors) report_.errors.resize(kMaxErrors);
    return std::move(report_);
  }

 private:
  template <typename... Args>
  void error(fmt::format_string<Args...> format, Args&&... args) {
    if (report_.errors.size() < kMaxErrors) report_.errors.push_back(fmt::format(format, std::forward<Args>(args)...));
  }

  // The plan's shape: head counts that GQA can split, a dtype, streams, and no more buffer rows than the
  // symbolic run below may hold (its labels take tens of bytes per row and tracked head).
  void check_layout() {
    const HeadLayout& h = plan_.heads;
    if (h.q_heads < 1 || h.q_heads > kMaxPlanHeads || h.kv_heads < 1 || h.q_heads % h.kv_heads != 0) {
      error("heads: q_heads = {}, kv_heads = {}: need 1 <= kv_heads, kv_heads dividing q_heads <= {}", h.q_heads,
            h.kv_heads, kMaxPlanHeads);
    }
    if (h.head_dim < 1 || h.head_dim > kMaxPlanHeadDim) {
      error("heads.head_dim = {}: must be in [1, {}]", h.head_dim, kMaxPlanHeadDim);
    }
    if (h.dtype_bytes != 2 && h.dtype_bytes != 4) error("heads.dtype_bytes = {}: must be 2 or 4", h.dtype_bytes);
    if (plan_.nano_batches < 1) error("nano_batches = {}: must be >= 1", plan_.nano_batches);
    if (!report_.ok()) return;
    const bool per_head = program_labels::cuts_heads(plan_);
    Tokens cells = 0;
    for (const auto& p : plan_.programs) {
      for (const auto& b : p.buffers) {
        if (b.rows < 0 || b.rows > kMaxPlanCells) {
          error("rank {}: buffer '{}' has {} rows: must be in [0, {}]", p.rank, b.name, b.rows, kMaxPlanCells);
          return;
        }
        // What the symbolic run allocates: a label per row, or per row and head where heads are cut. Each
        // term is at most 2^28 x 1024, and the sum stops at the first step past the bound: no overflow.
        cells += b.rows * (per_head ? h.heads_of(b.field) : 1);
        if (cells > kMaxPlanCells) {
          error("buffers: over {} rows{} in all programs, more than verify_plan checks", kMaxPlanCells,
                per_head ? " x heads" : "");
          return;
        }
      }
      for (const auto& i : p.instructions) {
        if (i.stream < 0 || i.stream >= plan_.nano_batches) {
          error("rank {}: an instruction's stream {} is not in [0, nano_batches = {})", p.rank, i.stream,
                plan_.nano_batches);
          return;
        }
      }
    }
  }

  void check_documents() {
    if (plan_.documents.size() != batch_.documents.size()) {
      error("plan has {} documents, the batch {}", plan_.documents.size(), batch_.documents.size());
    }
    if (plan_.ranks() != batch_.ranks) error("plan has {} programs, the batch {} ranks", plan_.ranks(), batch_.ranks);
    for (int r = 0; r < plan_.ranks(); ++r) {
      if (plan_.programs[r].rank != r) error("programs[{}].rank = {}", r, plan_.programs[r].rank);
    }
    for (std::size_t d = 0; d < plan_.documents.size(); ++d) {
      const PlanDocument& doc = plan_.documents[d];
      if (doc.length < 1 || doc.length > kMaxPlanCells) {
        error("documents[{}].length = {}: must be in [1, {}]", d, doc.length, kMaxPlanCells);
        continue;
      }
      if (!doc.head_masks.empty() && static_cast<int>(doc.head_masks.size()) != plan_.heads.q_heads) {
        error("documents[{}].head_masks: {} masks for {} q heads", d, doc.head_masks.size(), plan_.heads.q_heads);
      }
      try {
        check_mask_lengths(doc.mask, doc.head_masks, doc.length, fmt::format("documents[{}]", d));
      } catch (const Error& e) {
        error("{}", e.what());
      }
    }
    for (std::size_t d = 0; d < std::min(plan_.documents.size(), batch_.documents.size()); ++d) {
      const PlanDocument& mine = plan_.documents[d];
      const Document& theirs = batch_.documents[d];
      if (mine.length != theirs.length || !(mine.mask == theirs.mask) || mine.head_masks != theirs.head_masks) {
        error("documents[{}]: the plan's {} tokens ({}) differ from the batch's {} ({})", d, mine.length,
              mine.mask.to_string(), theirs.length, theirs.mask.to_string());
      }
    }
  }

  // Buffer sizes, and the caller's rows: every owned range inside its document and inside every input
  // and output buffer.
  void check_buffers(const Program& p) {
    for (const auto& b : p.buffers) {
      if (b.rows < 0) error("rank {}: buffer '{}' has {} rows", p.rank, b.name, b.rows);
    }
    for (const auto& o : p.owned) {
      if (o.doc < 0 || o.doc >= static_cast<int>(plan_.documents.size()) || o.tokens.begin < 0 ||
          o.tokens.end < o.tokens.begin || o.tokens.end > plan_.documents[o.doc].length || o.row < 0 ||
          o.row > kMaxPlanCells) {
        error("rank {}: owned rows of document {} [{}, {}) leave the document", p.rank, o.doc, o.tokens.begin,
              o.tokens.end);
        continue;
      }
      for (const auto& b : p.buffers) {
        if ((b.init == BufferInit::kInput || b.output) && o.row + o.tokens.size() > b.rows) {
          error("rank {}: owned rows [{}, {}) leave buffer '{}' of {} rows", p.rank, o.row, o.row + o.tokens.size(),
                b.name, b.rows);
        }
      }
    }
  }

  // The kernels' rule: Q-side operands have the Q buffer's rows, K/V-side ones the K buffer's.
  void check_rows(const Program& p, std::size_t at, std::span<const int> buffers) {
    for (std::size_t i = 0; i < buffers.size(); ++i) {
      const int same_as = is_kv_side(p.buffers[buffers[i]].field) ? buffers[1] : buffers[0];
      if (p.buffers[buffers[i]].rows != p.buffers[same_as].rows) {
        error("rank {} instruction {}: operand '{}' has {} rows, '{}' has {}", p.rank, at, p.buffers[buffers[i]].name,
              p.buffers[buffers[i]].rows, p.buffers[same_as].name, p.buffers[same_as].rows);
      }
    }
  }

  bool slice_ok(const Program& p, const Slice& s, std::string_view what) {
    // Written so that no sum can overflow: row and rows are whatever the file said.
    if (s.buffer < 0 || s.buffer >= static_cast<int>(p.buffers.size()) || s.row < 0 || s.rows < 0 ||
        s.row > p.buffers[s.buffer].rows || s.rows > p.buffers[s.buffer].rows - s.row) {
      error("rank {}: {}: slice [{}, +{}) of buffer {} is out of range", p.rank, what, s.row, s.rows, s.buffer);
      return false;
    }
    const HeadRange h = s.heads;
    const int width = plan_.heads.heads_of(p.buffers[s.buffer].field);
    if (!heads_ok(h, width)) {
      error("rank {}: {}: slice of '{}' has heads [{}, {}) outside its {} heads", p.rank, what,
            p.buffers[s.buffer].name, h.begin, h.end, width);
      return false;
    }
    return true;
  }

  // Two slices of one shape: the same field, rows and number of heads.
  bool same_shape(const Program& p, const Slice& a, const Slice& b) const {
    const Field f = field_of(p, a.buffer);
    return f == field_of(p, b.buffer) && a.rows == b.rows &&
           a.heads.count(plan_.heads.heads_of(f)) == b.heads.count(plan_.heads.heads_of(f));
  }

  Field field_of(const Program& p, int buffer) const { return p.buffers[buffer].field; }

  void check_operands(const Program& p, std::size_t at, std::span<const int> buffers, std::span<const Field> fields) {
    for (std::size_t i = 0; i < buffers.size(); ++i) {
      if (buffers[i] < 0 || buffers[i] >= static_cast<int>(p.buffers.size())) {
        error("rank {} instruction {}: operand {} names no buffer ({})", p.rank, at, i, buffers[i]);
      } else if (field_of(p, buffers[i]) != fields[i]) {
        error("rank {} instruction {}: operand '{}' holds {}, the call needs {}", p.rank, at,
              p.buffers[buffers[i]].name, to_string(field_of(p, buffers[i])), to_string(fields[i]));
      }
    }
  }

  void check_items(const Program& p, std::size_t at, const std::vector<AttentionItem>& items, int q, int k) {
    if (!report_.ok()) return;
    for (const auto& item : items) {
      if (item.doc < 0 || item.doc >= static_cast<int>(plan_.documents.size())) {
        error("rank {} instruction {}: item of document {}: no such document", p.rank, at, item.doc);
        continue;
      }
      const Tokens len = plan_.documents[item.doc].length;
      auto span_ok = [&](const RowSpan& s, int buffer) {
        const Tokens rows = p.buffers[buffer].rows;
        return s.count >= 0 && s.row >= 0 && s.row <= rows && s.count <= rows - s.row && s.position >= 0 &&
               s.position <= len && s.count <= len - s.position;
      };
      if (!span_ok(item.queries[0], q) || !span_ok(item.queries[1], q) || !span_ok(item.keys, k) ||
          item.queries[0].count == 0 || item.keys.count == 0) {
        error("rank {} instruction {}: an item of document {} leaves its buffers or the document", p.rank, at,
              item.doc);
      }
      const HeadRange h = item.heads;
      if (!heads_ok(h, plan_.heads.q_heads)) {
        error("rank {} instruction {}: an item of document {} has heads [{}, {}) outside the plan's {} q heads", p.rank,
              at, item.doc, h.begin, h.end, plan_.heads.q_heads);
      }
      const auto& head_masks = plan_.documents[item.doc].head_masks;
      if (!head_masks.empty() && static_cast<int>(head_masks.size()) != plan_.heads.q_heads) {
        error("documents[{}].head_masks: {} masks for {} q heads", item.doc, head_masks.size(), plan_.heads.q_heads);
      }
    }
  }

  void check_structure(const Program& p) {
    check_buffers(p);
    if (!report_.ok()) return;
    std::set<int> started, waited;
    for (std::size_t at = 0; at < p.instructions.size(); ++at) {
      const auto& op = p.instructions[at].op;
      if (const auto* c = std::get_if<Copy>(&op)) {
        if (slice_ok(p, c->src, "copy source") && slice_ok(p, c->dst, "copy target") &&
            !same_shape(p, c->src, c->dst)) {
          error("rank {} instruction {}: copy between different fields or sizes", p.rank, at);
        }
      } else if (const auto* l = std::get_if<CommLaunch>(&op)) {
        if (!started.insert(l->id).second) error("rank {}: launch id {} is used twice", p.rank, l->id);
        for (const auto* list : {&l->sends, &l->receives}) {
          for (const auto& m : *list) {
            slice_ok(p, m.slice, "message");
            if (m.peer < 0 || m.peer >= plan_.ranks() || m.peer == p.rank) {
              error("rank {}: launch {}: message peer {} is not another rank", p.rank, l->id, m.peer);
            }
          }
        }
      } else if (const auto* w = std::get_if<CommWait>(&op)) {
        if (!started.count(w->launch) || !waited.insert(w->launch).second) {
          error("rank {} instruction {}: wait for launch {} that is not running", p.rank, at, w->launch);
        }
      } else if (const auto* a = std::get_if<Attention>(&op)) {
        const int ops[] = {a->q, a->k, a->v, a->o, a->lse};
        check_operands(p, at, ops, operand_fields_forward);
        if (report_.ok()) check_rows(p, at, ops);
        check_items(p, at, a->items, a->q, a->k);
      } else if (const auto* b = std::get_if<AttentionBackward>(&op)) {
        const int ops[] = {b->q, b->k, b->v, b->o, b->lse, b->d_o, b->dq, b->dk, b->dv};
        check_operands(p, at, ops, operand_fields_backward);
        if (report_.ok()) check_rows(p, at, ops);
        check_items(p, at, b->items, b->q, b->k);
      } else if (const auto* r = std::get_if<Reduce>(&op)) {
        check_reduce(p, at, *r);
      }
    }
    for (int id : started) {
      if (!waited.count(id)) error("rank {}: launch {} is never waited for", p.rank, id);
    }
  }

  void check_reduce(const Program& p, std::size_t at, const Reduce& r) {
    const bool merge = r.op == ReduceOp::kMerge;
    // A sum has no LSE operands: they stay empty, so the plan has one encoding (JSON drops what a binary
    // file could hold there).
    if (!merge && (!(r.out_lse == Slice{}) || !r.part_lse.empty())) {
      error("rank {} instruction {}: a sum has LSE operands (out_lse, part_lse), which only a merge uses", p.rank, at);
      return;
    }
    if (!slice_ok(p, r.out, "reduce output") || (merge && !slice_ok(p, r.out_lse, "reduce LSE output"))) return;
    if (r.parts.empty() || (merge && r.part_lse.size() != r.parts.size())) {
      error("rank {} instruction {}: reduce has {} parts and {} LSE parts", p.rank, at, r.parts.size(),
            r.part_lse.size());
      return;
    }
    auto fits = [&](const Slice& part, const Slice& out) {
      return slice_ok(p, part, "reduce part") && same_shape(p, part, out);
    };
    for (std::size_t i = 0; i < r.parts.size(); ++i) {
      if (!fits(r.parts[i], r.out) || (merge && !fits(r.part_lse[i], r.out_lse))) {
        error("rank {} instruction {}: reduce part {} differs from the output in size or field", p.rank, at, i);
      }
    }
    if (merge && (field_of(p, r.out.buffer) != Field::kO || field_of(p, r.out_lse.buffer) != Field::kLse)) {
      error("rank {} instruction {}: a merge reduces O with LSE", p.rank, at);
    }
  }

  // Every send has exactly one receive with the same endpoints, tag and size (of the slices' heads), and
  // the other way round.
  void check_matching() {
    using Key = std::tuple<int, int, int>;           // (source, destination, tag)
    std::map<Key, std::pair<Tokens, Tokens>> bytes;  // send bytes, receive bytes (-1: none)
    auto size_of = [&](const Program& p, const Slice& s) { return plan_.heads.bytes(p.buffers[s.buffer].field, s); };
    for (const auto& p : plan_.programs) {
      for (const auto& i : p.instructions) {
        const auto* l = std::get_if<CommLaunch>(&i.op);
        if (!l) continue;
        for (const auto& m : l->sends) {
          auto [it, fresh] = bytes.try_emplace(Key{p.rank, m.peer, m.tag}, -1, -1);
          if (!fresh && it->second.first >= 0) error("two sends from rank {} to {} with tag {}", p.rank, m.peer, m.tag);
          it->second.first = size_of(p, m.slice);
        }
        for (const auto& m : l->receives) {
          auto [it, fresh] = bytes.try_emplace(Key{m.peer, p.rank, m.tag}, -1, -1);
          if (!fresh && it->second.second >= 0)
            error("two receives on rank {} from {} with tag {}", p.rank, m.peer, m.tag);
          it->second.second = size_of(p, m.slice);
        }
      }
    }
    for (const auto& [key, b] : bytes) {
      const auto [src, dst, tag] = key;
      if (b.first != b.second) {
        error("message {} -> {} tag {}: {} bytes sent, {} received (-1: missing)", src, dst, tag, b.first, b.second);
      }
    }
  }

  void check_coverage() {
    Assignment items;
    items.planner = plan_.planner;
    items.q_heads = plan_.heads.q_heads;
    items.batch = batch_;
    for (const auto& p : plan_.programs) {
      for (const auto& i : p.instructions) {
        const std::vector<AttentionItem>* list = nullptr;
        if (const auto* a = std::get_if<Attention>(&i.op)) list = &a->items;
        if (const auto* b = std::get_if<AttentionBackward>(&i.op)) list = &b->items;
        if (!list) continue;
        for (const auto& item : *list) {
          CATask t;
          t.doc = item.doc;
          t.server = p.rank;
          for (int q = 0; q < 2; ++q)
            t.queries[q] = {item.queries[q].position, item.queries[q].position + item.queries[q].count};
          t.keys = {item.keys.position, item.keys.position + item.keys.count};
          t.heads = item.heads;
          items.tasks.push_back(t);
        }
      }
    }
    for (auto& e : verify_coverage(items).errors) error("coverage: {}", e);
  }

  // All ranks advance in turn; each runs until a wait whose messages cannot complete yet.
  void simulate(program_labels::Machine& machine) {
    const int ranks = plan_.ranks();
    std::vector<std::size_t> pc(static_cast<std::size_t>(ranks), 0);
    bool progress = true;
    while (progress && report_.ok()) {
      progress = false;
      for (int r = 0; r < ranks; ++r) {
        const auto& instructions = plan_.programs[r].instructions;
        while (report_.ok() && pc[r] < instructions.size() && machine.ready(r, instructions[pc[r]].op)) {
          machine.step(r, pc[r], instructions[pc[r]].op);
          ++pc[r];
          progress = true;
        }
      }
    }
    for (int r = 0; r < ranks && report_.ok(); ++r) {
      if (pc[r] < plan_.programs[r].instructions.size()) {
        error("deadlock: rank {} waits forever at instruction {} ({})", r, pc[r],
              operation_name(plan_.programs[r].instructions[pc[r]].op));
      }
    }
  }

  const Plan& plan_;
  const Batch& batch_;
  VerifyReport report_;
};

// One posting (program.hpp, CommLaunch): what one launch sends to, or receives from, one peer: the tags of
// those messages in list order.
struct Posting {
  int launch = 0;
  std::vector<int> tags;
};

std::string posting_text(const std::vector<Posting>& postings, std::size_t k) {
  if (k >= postings.size()) return fmt::format("nothing (it has only {})", postings.size());
  constexpr std::size_t kShown = 8;
  const auto& tags = postings[k].tags;
  std::string shown;
  for (std::size_t i = 0; i < std::min(tags.size(), kShown); ++i) shown += fmt::format("{}{}", i ? ", " : "", tags[i]);
  if (tags.size() > kShown) shown += fmt::format(", ... ({} tags)", tags.size());
  return fmt::format("launch {}'s messages with tags [{}]", postings[k].launch, shown);
}

}  // namespace

std::vector<std::string> posting_order_errors(const Plan& plan) {
  using Pair = std::pair<int, int>;  // (sender, receiver)
  std::map<Pair, std::vector<Posting>> sent, received;
  for (const auto& p : plan.programs) {
    for (const auto& i : p.instructions) {
      const auto* l = std::get_if<CommLaunch>(&i.op);
      if (!l) continue;
      for (const bool sends : {true, false}) {
        std::map<int, std::vector<int>> by_peer;
        for (const auto& m : sends ? l->sends : l->receives) by_peer[m.peer].push_back(m.tag);
        for (auto& [peer, tags] : by_peer) {
          (sends ? sent[{p.rank, peer}] : received[{peer, p.rank}]).push_back({l->id, std::move(tags)});
        }
      }
    }
  }
  std::set<Pair> pairs;
  for (const auto* side : {&sent, &received}) {
    for (const auto& entry : *side) pairs.insert(entry.first);
  }
  std::vector<std::string> errors;
  for (const auto& [src, dst] : pairs) {
    const auto& s = sent[{src, dst}];
    const auto& r = received[{src, dst}];
    std::size_t k = 0;
    while (k < s.size() && k < r.size() && s[k].tags == r[k].tags) ++k;
    if (k == s.size() && k == r.size()) continue;
    errors.push_back(fmt::format(
        "posting order {} -> {}: rank {}'s send posting #{} to rank {} is {}, but rank {}'s receive posting #{} from "
        "rank {} is {}; NCCL pairs the two, so they must carry the same messages in the same order",
        src, dst, src, k + 1, dst, posting_text(s, k), dst, k + 1, src, posting_text(r, k)));
  }
  return errors;
}

VerifyReport verify_plan(const Plan& plan, const Batch& batch) { return PlanChecker(plan, batch).run(); }

Batch plan_batch(const Plan& plan) {
  Batch batch;
  batch.ranks = plan.ranks();
  for (std::size_t d = 0; d < plan.documents.size(); ++d) {
    const PlanDocument& doc = plan.documents[d];
    batch.documents.push_back({static_cast<std::int64_t>(d), doc.length, doc.mask, doc.head_masks});
  }
  for (const auto& p : plan.programs) {
    // Owned ranges come from outside: only sound ones are summed (verify_plan reports the others).
    Tokens tokens = 0;
    for (const auto& o : p.owned) {
      batch.segments.push_back({o.doc, o.tokens, p.rank});
      if (o.tokens.begin >= 0 && o.tokens.begin <= o.tokens.end && o.tokens.end <= kMaxPlanCells) {
        tokens += o.tokens.size();
      }
    }
    batch.tokens_per_rank = std::max(batch.tokens_per_rank, tokens);
  }
  std::sort(batch.segments.begin(), batch.segments.end(), [](const Segment& a, const Segment& b) {
    return std::tie(a.doc, a.tokens.begin, a.tokens.end) < std::tie(b.doc, b.tokens.begin, b.tokens.end);
  });
  return batch;
}

VerifyReport verify_plan(const Plan& plan) { return verify_plan(plan, plan_batch(plan)); }

void require_valid_plan(const Plan& plan, std::string_view what) {
  const VerifyReport report = verify_plan(plan);
  if (!report.ok()) fail("{}: fails verify_plan, so it is not run: {}", what, report.summary());
}

}  // namespace fulcrum
