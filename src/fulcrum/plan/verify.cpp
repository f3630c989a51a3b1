#include "fulcrum/plan/verify.hpp"

#include "fulcrum/workload/head_masks.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <tuple>

namespace fulcrum {
namespace {

constexpr std::size_t kMaxErrors = 32;

// One query range of one task, as the coverage sweep sees it.
struct RowEntry {
  Range rows;
  std::size_t task;
};

// What the transfers deliver and the ranks hold, for check_traffic: token sets per q head cell (one cell
// for every head unless some task or transfer cuts the heads).
struct Delivery {
  using Key = std::tuple<int, int, TensorKind>;  // (rank, doc, kind) received
  int q_heads = 0;
  int tracked = 1;  // head cells
  std::map<Key, std::vector<RangeSet>> received;
  // (doc, kind) broadcast: every rank but the sender receives it. A rank lacks only tokens it does not
  // own, and a broadcast comes from the tokens' owner (checked by record_transfer), so one set per
  // document serves every rank.
  std::map<std::pair<int, TensorKind>, std::vector<RangeSet>> broadcast;
  std::map<std::tuple<int, int, int>, std::vector<RangeSet>> outputs;  // (server, owner, doc) O+LSE sent back
  std::map<std::pair<int, int>, RangeSet> owned;
  std::map<std::pair<int, int>, RangeSet> computed_rows;  // (server, doc) rows computed there

  [[nodiscard]] std::pair<int, int> head_cells(HeadRange h) const {
    return tracked == 1 ? std::pair{0, 1} : std::pair{h.first(), h.last(q_heads)};
  }

  template <class Map, class K>
  std::vector<RangeSet>& per_head(Map& map, const K& key) {
    auto& sets = map[key];
    sets.resize(static_cast<std::size_t>(tracked));
    return sets;
  }

  // The first of `heads` for which `sets` (together with `also`, if given) lack some of `gaps`, or -1.
  int first_missing(std::vector<RangeSet>& sets, const std::vector<RangeSet>* also, HeadRange heads,
                    const std::vector<Range>& gaps) const {
    const auto [h0, h1] = head_cells(heads);
    for (int h = h0; h < h1; ++h) {
      for (const auto& gap : gaps) {
        for (const auto& lack : sets[h].missing(gap)) {
          if (also == nullptr || !(*also)[h].covers(lack)) return tracked == 1 ? heads.first() : h;
        }
      }
    }
    return -1;
  }

  // The first of `heads` for which `rank` neither owns nor receives all of `r` of `kind`, or -1.
  int missing_head(int rank, int doc, TensorKind kind, Range r, HeadRange heads) {
    const auto gaps = owned[{rank, doc}].missing(r);
    if (gaps.empty()) return -1;
    const auto b = broadcast.find({doc, kind});
    return first_missing(per_head(received, Key{rank, doc, kind}), b == broadcast.end() ? nullptr : &b->second, heads,
                         gaps);
  }
};

class Checker {
 public:
  Checker(const Assignment& a, bool traffic) : a_(a), traffic_(traffic) {}

  VerifyReport run() {
    check_placement();
    if (!report_.ok()) return std::move(report_);  // the remaining checks rely on a sound placement
    check_tasks_well_formed();
    if (!report_.ok()) return std::move(report_);
    tasks_by_doc_.assign(a_.batch.documents.size(), {});
    for (std::size_t i = 0; i < a_.tasks.size(); ++i) tasks_by_doc_[a_.tasks[i].doc].push_back(i);
    for (std::size_t d = 0; d < a_.batch.documents.size(); ++d) check_heads_coverage(static_cast<int>(d));
    if (traffic_) check_traffic();
    return std::move(report_);
  }

 private:
  template <typename... Args>
  void error(fmt::format_string<Args...> format, Args&&... args) {
    if (report_.errors.size() < kMaxErrors) report_.errors.push_back(fmt::format(format, std::forward<Args>(args)...));
  }

  void check_placement() {
    const auto& b = a_.batch;
    if (b.ranks < 1) error("batch.ranks = {}: must be >= 1", b.ranks);
    std::vector<Tokens> next(b.documents.size(), 0);
    int previous_doc = -1;
    for (const auto& s : b.segments) {
      if (s.doc < 0 || s.doc >= static_cast<int>(b.documents.size())) {
        error("segment of document {}: no such document", s.doc);
        continue;
      }
      if (s.rank < 0 || s.rank >= b.ranks) error("segment of document {} on rank {}: no such rank", s.doc, s.rank);
      if (s.doc < previous_doc) error("segments are not sorted by document");
      previous_doc = s.doc;
      if (s.tokens.begin != next[s.doc] || s.tokens.empty()) {
        error("document {}: segment [{}, {}) does not continue at token {}", s.doc, s.tokens.begin, s.tokens.end,
              next[s.doc]);
      }
      next[s.doc] = std::max(next[s.doc], s.tokens.end);
    }
    for (std::size_t d = 0; d < b.documents.size(); ++d) {
      if (b.documents[d].length < 1) error("document {}: length {} < 1", d, b.documents[d].length);
      for (int h = -1; h < static_cast<int>(b.documents[d].head_masks.size()); ++h) {
        const MaskSpec& mask = h < 0 ? b.documents[d].mask : b.documents[d].mask_of(h);
        if (b.documents[d].length % mask.length_multiple() != 0) {
          error("document {}: length {} is not a multiple of {}, as mask {} needs", d, b.documents[d].length,
                mask.length_multiple(), mask.to_string());
        }
      }
      if (next[d] != b.documents[d].length) {
        error("document {}: segments cover {} of {} tokens", d, next[d], b.documents[d].length);
      }
    }
  }

  void check_tasks_well_formed() {
    for (std::size_t i = 0; i < a_.tasks.size(); ++i) {
      const auto& t = a_.tasks[i];
      if (t.doc < 0 || t.doc >= static_cast<int>(a_.batch.documents.size())) {
        error("task {}: document {} does not exist", i, t.doc);
        continue;
      }
      if (t.server < 0 || t.server >= a_.batch.ranks) error("task {}: server {} is not a rank", i, t.server);
      const int q_heads = heads_of(t.doc);
      if (!t.heads.all() && q_heads == 0) {
        error("task {}: heads [{}, {}) need the model's q heads (Assignment::q_heads = 0)", i, t.heads.begin,
              t.heads.end);
      } else if (t.heads.all() ? t.heads.begin != 0
                               : (t.heads.begin < 0 || t.heads.begin >= t.heads.end || t.heads.end > q_heads)) {
        error("task {}: heads [{}, {}) are empty or leave the model's {} q heads", i, t.heads.begin, t.heads.end,
              q_heads);
      }
      const Range doc{0, a_.batch.documents[t.doc].length};
      for (const auto& r : {t.queries[0], t.keys}) {
        if (r.empty() || intersect(r, doc) != r) {
          error("task {}: range [{}, {}) is empty or leaves document {} of {} tokens", i, r.begin, r.end, t.doc,
                doc.end);
        }
      }
      if (!t.queries[1].empty() &&
          (intersect(t.queries[1], doc) != t.queries[1] || !intersect(t.queries[0], t.queries[1]).empty())) {
        error("task {}: second query range [{}, {}) leaves the document or overlaps the first", i, t.queries[1].begin,
              t.queries[1].end);
      }
    }
  }

  // The q heads a document's coverage is checked over: the Assignment's, else its per-head masks'.
  int heads_of(int d) const {
    return a_.q_heads > 0 ? a_.q_heads : static_cast<int>(a_.batch.documents[d].head_masks.size());
  }

  // Exact coverage of every (head, query, key) triple. Heads are cut into runs at every task's head
  // range edge and wherever the mask changes; within a run the same tasks cover every head under one
  // mask, so one row sweep per run proves them all. All-head tasks over one mask are one run: the
  // check costs what it did before heads existed.
  void check_heads_coverage(int d) {
    const auto& doc = a_.batch.documents[d];
    const auto& tasks = tasks_by_doc_[d];
    bool all_heads = doc.head_masks.empty();
    for (std::size_t i : tasks) all_heads = all_heads && a_.tasks[i].heads.all();
    if (all_heads) return check_coverage(d, tasks, doc.mask, "");
    const int q_heads = heads_of(d);
    if (!doc.head_masks.empty() && static_cast<int>(doc.head_masks.size()) != q_heads) {
      return error("document {}: head_masks has {} masks, the model has {} q heads", d, doc.head_masks.size(), q_heads);
    }
    std::vector<int> cuts = {0, q_heads};
    for (std::size_t i : tasks) {
      cuts.push_back(a_.tasks[i].heads.first());
      cuts.push_back(a_.tasks[i].heads.last(q_heads));
    }
    for (const auto& run : mask_runs(doc.mask, doc.head_masks, HeadRange{0, q_heads})) cuts.push_back(run.heads.begin);
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    for (std::size_t c = 0; c + 1 < cuts.size(); ++c) {
      std::vector<std::size_t> covering;
      for (std::size_t i : tasks) {
        if (a_.tasks[i].heads.contains(cuts[c], q_heads)) covering.push_back(i);
      }
      const std::size_t before = report_.errors.size();
      check_coverage(d, covering, doc.mask_of(cuts[c]), fmt::format(" heads [{}, {})", cuts[c], cuts[c + 1]));
      if (report_.errors.size() != before) return;  // one broken run is enough to say what is wrong
    }
  }

  // Exact coverage by sweeping rows. Between consecutive "breakpoint" rows the set of tasks holding the
  // row is fixed and every visible-range endpoint moves linearly, so if the tasks' key ranges tile the
  // visible set exactly at both ends of such a stretch they tile it on every row in between.
  void check_coverage(int d, const std::vector<std::size_t>& tasks, const MaskSpec& mask, const std::string& heads) {
    const auto& doc = a_.batch.documents[d];
    std::vector<RowEntry> entries;
    std::vector<Tokens> rows = {0, doc.length};
    std::vector<Tokens> key_edges = {0, doc.length};
    Tokens task_pairs = 0;
    for (std::size_t i : tasks) {
      const auto& t = a_.tasks[i];
      for (const auto& q : t.query_ranges()) {
        entries.push_back({q, i});
        rows.push_back(q.begin);
        rows.push_back(q.end);
        // Overlapping tasks could sum past 64 bits; any sum that large already exceeds the document's pairs.
        if (__builtin_add_overflow(task_pairs, mask.count_pairs(q, t.keys, doc.length), &task_pairs)) {
          task_pairs = std::numeric_limits<Tokens>::max();
        }
      }
      key_edges.push_back(t.keys.begin);
      key_edges.push_back(t.keys.end);
    }
    if (task_pairs != mask.document_pairs(doc.length)) {
      error("document {}{}: tasks compute {} pairs, the mask has {} (FLOPs not conserved)", d, heads, task_pairs,
            mask.document_pairs(doc.length));
    }
    for (Tokens r : mask.row_breakpoints(key_edges, doc.length)) rows.push_back(r);
    std::sort(rows.begin(), rows.end());
    rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
    std::sort(entries.begin(), entries.end(),
              [](const RowEntry& x, const RowEntry& y) { return x.rows.begin < y.rows.begin; });

    std::vector<const RowEntry*> active;
    std::size_t next_entry = 0;
    for (std::size_t i = 0; i + 1 < rows.size(); ++i) {
      const Tokens first = rows[i], last = rows[i + 1] - 1;
      if (first >= doc.length) break;
      std::erase_if(active, [&](const RowEntry* e) { return e->rows.end <= first; });
      while (next_entry < entries.size() && entries[next_entry].rows.begin <= first) {
        if (entries[next_entry].rows.end > first) active.push_back(&entries[next_entry]);
        ++next_entry;
      }
      if (!check_row(d, mask, heads, first, active) || (last != first && !check_row(d, mask, heads, last, active))) {
        return;
      }
    }
  }

  bool check_row(int d, const MaskSpec& mask, const std::string& heads, Tokens q,
                 const std::vector<const RowEntry*>& active) {
    const auto& doc = a_.batch.documents[d];
    const auto visible = mask.visible(q, doc.length);
    std::vector<Range> pieces;
    for (const auto* e : active) {
      for (const auto& v : visible) {
        const Range piece = intersect(a_.tasks[e->task].keys, v);
        if (!piece.empty()) pieces.push_back(piece);
      }
    }
    std::sort(pieces.begin(), pieces.end(), [](Range x, Range y) { return x.begin < y.begin; });
    Tokens covered = 0;
    RangeSet uni;
    for (const auto& p : pieces) {
      covered += p.size();
      uni.add(p);
    }
    Tokens visible_count = 0;
    RangeSet expected;
    for (const auto& v : visible) {
      visible_count += v.size();
      expected.add(v);
    }
    if (covered != uni.size()) {
      error("document {}{} row {}: some key is computed more than once ({} key-computations for {} keys)", d, heads, q,
            covered, uni.size());
      return false;
    }
    if (uni.ranges() != expected.ranges()) {
      error("document {}{} row {}: tasks cover {} of its {} visible keys", d, heads, q, uni.size(), visible_count);
      return false;
    }
    return true;
  }

  // The transfers suffice: every task's Q rows and visible K/V reach its server, and its O rows return
  // to their owners, for each of its q heads (a K/V transfer counts for the q heads it names). Heads are
  // tracked one by one only when some task or transfer cuts them; otherwise one set stands for all.
  void check_traffic() {
    bool cut = false;
    for (const auto& t : a_.tasks) cut = cut || !t.heads.all();
    for (const auto& t : a_.transfers) cut = cut || !t.heads.all();
    Delivery delivery;
    delivery.q_heads = a_.q_heads;
    delivery.tracked = cut && a_.q_heads > 0 ? a_.q_heads : 1;
    for (const auto& s : a_.batch.segments) delivery.owned[{s.rank, s.doc}].add(s.tokens);
    for (const auto& t : a_.tasks) {
      for (const auto& q : t.query_ranges()) delivery.computed_rows[{t.server, t.doc}].add(q);
    }
    for (std::size_t i = 0; i < a_.transfers.size(); ++i) record_transfer(i, delivery);
    for (std::size_t i = 0; i < a_.tasks.size(); ++i) check_task_traffic(i, delivery);
  }

  // Transfer i into `delivery`, unless it is malformed or sends what its sender may not.
  void record_transfer(std::size_t i, Delivery& delivery) {
    const auto& t = a_.transfers[i];
    const int q_heads = delivery.q_heads;
    const bool valid_ranks =
        t.src >= 0 && t.src < a_.batch.ranks && (t.broadcast() || (t.dst >= 0 && t.dst < a_.batch.ranks));
    if (!valid_ranks || t.doc < 0 || t.doc >= static_cast<int>(a_.batch.documents.size()) || t.tokens.empty()) {
      error("transfer {}: bad ranks {} -> {}, document {} or empty range", i, t.src, t.dst, t.doc);
      return;
    }
    if (!t.heads.all() &&
        (q_heads == 0 || t.heads.begin < 0 || t.heads.begin >= t.heads.end || t.heads.end > q_heads)) {
      error("transfer {}: heads [{}, {}) are empty or leave the model's {} q heads", i, t.heads.begin, t.heads.end,
            q_heads);
      return;
    }
    const auto [h0, h1] = delivery.head_cells(t.heads);
    if (t.broadcast() && t.kind == TensorKind::kOut) {
      error("transfer {}: O of document {} [{}, {}) from rank {} to every rank: O returns to its owner only", i, t.doc,
            t.tokens.begin, t.tokens.end, t.src);
    } else if (t.kind == TensorKind::kOut) {
      if (!delivery.computed_rows[{t.src, t.doc}].covers(t.tokens) ||
          !delivery.owned[{t.dst, t.doc}].covers(t.tokens)) {
        error("transfer {}: O of document {} [{}, {}) from rank {} to {}: not computed there or not owned there", i,
              t.doc, t.tokens.begin, t.tokens.end, t.src, t.dst);
      }
      auto& sets = delivery.per_head(delivery.outputs, std::tuple{t.src, t.dst, t.doc});
      for (int h = h0; h < h1; ++h) sets[h].add(t.tokens);
    } else {
      if (!delivery.owned[{t.src, t.doc}].covers(t.tokens)) {
        error("transfer {}: {} of document {} [{}, {}) sent by rank {}, which does not own it", i, to_string(t.kind),
              t.doc, t.tokens.begin, t.tokens.end, t.src);
      }
      auto& sets = t.broadcast() ? delivery.per_head(delivery.broadcast, std::pair{t.doc, t.kind})
                                 : delivery.per_head(delivery.received, Delivery::Key{t.dst, t.doc, t.kind});
      for (int h = h0; h < h1; ++h) sets[h].add(t.tokens);
    }
  }

  // Task i's Q rows and the K/V they see reach its server, and its O rows return to their owners.
  void check_task_traffic(std::size_t i, Delivery& delivery) {
    const auto& t = a_.tasks[i];
    const auto& doc = a_.batch.documents[t.doc];
    for (const auto& q : t.query_ranges()) {
      if (const int h = delivery.missing_head(t.server, t.doc, TensorKind::kQ, q, t.heads); h >= 0) {
        error("task {}: Q rows [{}, {}) of document {} (head {}) never reach server {}", i, q.begin, q.end, t.doc, h,
              t.server);
      }
      const auto runs = mask_runs(doc.mask, doc.head_masks, t.heads);
      for (const auto& k : keys_needed(runs, q, t.keys, doc.length)) {
        if (const int h = delivery.missing_head(t.server, t.doc, TensorKind::kKV, k, t.heads); h >= 0) {
          error("task {}: K/V [{}, {}) of document {} (for q head {}) never reach server {}", i, k.begin, k.end, t.doc,
                h, t.server);
        }
      }
      for (const auto& s : a_.batch.segments_overlapping(t.doc, q)) {
        const Range rows = intersect(s.tokens, q);
        if (rows.empty() || s.rank == t.server) continue;
        auto& returned = delivery.per_head(delivery.outputs, std::tuple{t.server, s.rank, t.doc});
        if (const int h = delivery.first_missing(returned, nullptr, t.heads, {rows}); h >= 0) {
          error("task {}: O of rows [{}, {}) of document {} (head {}) never returns from server {} to owner {}", i,
                rows.begin, rows.end, t.doc, h, t.server, s.rank);
        }
      }
    }
  }

  const Assignment& a_;
  bool traffic_;
  VerifyReport report_;
  std::vector<std::vector<std::size_t>> tasks_by_doc_;
};

}  // namespace

std::string VerifyReport::summary() const {
  if (ok()) return "valid";
  std::string out = fmt::format("{} problem(s):", errors.size());
  for (const auto& e : errors) out += "\n  " + e;
  return out;
}

VerifyReport verify(const Assignment& assignment) { return Checker(assignment, true).run(); }

VerifyReport verify_coverage(const Assignment& assignment) { return Checker(assignment, false).run(); }

VerifyReport verify(const Assignment& assignment, const Batch& input) {
  VerifyReport report;
  const auto& docs = assignment.batch.documents;
  bool same = docs.size() == input.documents.size() && assignment.batch.ranks == input.ranks;
  for (std::size_t i = 0; same && i < docs.size(); ++i) {
    same = docs[i].id == input.documents[i].id && docs[i].length == input.documents[i].length &&
           docs[i].mask == input.documents[i].mask && docs[i].head_masks == input.documents[i].head_masks;
  }
  if (!same) {
    report.errors.push_back(fmt::format("the assignment computes {} documents on {} ranks, the batch has {} on {}",
                                        docs.size(), assignment.batch.ranks, input.documents.size(), input.ranks));
    return report;
  }
  return verify(assignment);
}

}  // namespace fulcrum
