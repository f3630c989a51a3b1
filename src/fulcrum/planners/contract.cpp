#include "fulcrum/planners/contract.hpp"

#include "fulcrum/core/error.hpp"

#include <algorithm>

namespace fulcrum {
namespace {

template <typename... Args>
[[noreturn]] void broken(const Assignment& a, fmt::format_string<Args...> format, Args&&... args) {
  throw Error(
      fmt::format("planner {} broke its contract: {}", a.planner, fmt::format(format, std::forward<Args>(args)...)),
      ErrorKind::kInternal);
}

// Whether rank `rank` owns every token of `rows` of document `doc` in `batch`.
bool owns(const Batch& batch, int doc, Range rows, int rank) {
  Tokens covered = 0;
  for (const auto& s : batch.segments_overlapping(doc, rows)) {
    if (s.rank == rank) covered += intersect(s.tokens, rows).size();
  }
  return covered == rows.size();
}

}  // namespace

void check_planner_input(const Batch& batch, std::string_view planner, const PlannerCapabilities& caps) {
  validate_batch_shape(batch.ranks, batch.tokens_per_rank);
  const int documents = static_cast<int>(batch.documents.size());
  for (std::size_t i = 0; i < batch.segments.size(); ++i) {
    const Segment& s = batch.segments[i];
    if (s.doc < 0 || s.doc >= documents) fail("batch.segments[{}].doc = {}: must be in [0, {})", i, s.doc, documents);
    if (s.rank < 0 || s.rank >= batch.ranks) {
      fail("batch.segments[{}].rank = {}: must be in [0, {})", i, s.rank, batch.ranks);
    }
    const Tokens length = batch.documents[s.doc].length;
    if (s.tokens.empty() || s.tokens.begin < 0 || s.tokens.end > length) {
      fail("batch.segments[{}].tokens = [{}, {}): must be a non-empty range inside document {} of {} tokens", i,
           s.tokens.begin, s.tokens.end, s.doc, length);
    }
  }
  for (int d = 0; d < documents; ++d) {
    const MaskKind kind = batch.documents[d].mask.kind;
    if (std::find(caps.masks.begin(), caps.masks.end(), kind) == caps.masks.end()) {
      fail("batch.documents[{}].mask = '{}': planner {} does not plan this mask", d,
           batch.documents[d].mask.to_string(), planner);
    }
  }
}

void check_planner_contract(const Assignment& a, const Batch& input, const PlannerCapabilities& caps) {
  const Batch& b = a.batch;
  if (b.ranks != input.ranks) broken(a, "batch.ranks = {}: the input has {}", b.ranks, input.ranks);
  const int documents = static_cast<int>(b.documents.size());
  const bool divisions = !a.tasks.empty() && a.tasks.front().division >= 0;
  std::vector<int> server_of(b.documents.size(), -1);
  for (std::size_t i = 0; i < a.tasks.size(); ++i) {
    const CATask& t = a.tasks[i];
    if (t.doc < 0 || t.doc >= documents) broken(a, "tasks[{}].doc = {}: not in [0, {})", i, t.doc, documents);
    if (t.server < 0 || t.server >= b.ranks) broken(a, "tasks[{}].server = {}: not in [0, {})", i, t.server, b.ranks);
    const Range doc{0, b.documents[t.doc].length};
    for (const Range& q : t.query_ranges()) {
      if (q.empty() || intersect(q, doc) != q) {
        broken(a, "tasks[{}].queries: [{}, {}) is empty or leaves document {} of {} tokens", i, q.begin, q.end, t.doc,
               doc.end);
      }
    }
    if (intersect(t.keys, doc) != t.keys) {
      broken(a, "tasks[{}].keys = [{}, {}): leave document {} of {} tokens", i, t.keys.begin, t.keys.end, t.doc,
             doc.end);
    }
    if (!t.heads.all() && !caps.splits_heads) {
      broken(a, "tasks[{}].heads = [{}, {}): the planner declares that its tasks cover every head", i, t.heads.begin,
             t.heads.end);
    }
    if (t.heads.all() ? t.heads.begin != 0
                      : t.heads.begin < 0 || t.heads.begin >= t.heads.end || t.heads.end > a.q_heads) {
      broken(a, "tasks[{}].heads = [{}, {}): empty or outside the model's q_heads = {} (Assignment::q_heads)", i,
             t.heads.begin, t.heads.end, a.q_heads);
    }
    if ((t.division >= 0) != divisions || t.division < -1) {
      broken(a, "tasks[{}].division = {}: all tasks or none must have a division >= 0", i, t.division);
    }
    if (!caps.moves_attention) {
      for (const Range& q : t.query_ranges()) {
        if (!owns(b, t.doc, q, t.server)) {
          broken(a,
                 "tasks[{}] runs rows [{}, {}) of document {} on rank {}, which does not own them, but the planner "
                 "declares that attention never moves",
                 i, q.begin, q.end, t.doc, t.server);
        }
      }
    }
    if (!caps.splits_documents) {
      if (server_of[t.doc] >= 0 && server_of[t.doc] != t.server) {
        broken(a,
               "document {} is computed on ranks {} and {}, but the planner declares that it never splits "
               "documents",
               t.doc, server_of[t.doc], t.server);
      }
      server_of[t.doc] = t.server;
    }
  }
  if (caps.keeps_documents) {
    bool same = b.documents.size() == input.documents.size();
    for (std::size_t d = 0; same && d < b.documents.size(); ++d) {
      same = b.documents[d].length == input.documents[d].length && b.documents[d].mask == input.documents[d].mask;
    }
    if (!same) broken(a, "its documents differ from the input's, but it declares that it keeps them");
  }
  if (caps.keeps_placement) {
    bool same = b.segments.size() == input.segments.size();
    for (std::size_t i = 0; same && i < b.segments.size(); ++i) {
      const Segment &x = b.segments[i], &y = input.segments[i];
      same = x.doc == y.doc && x.tokens == y.tokens && x.rank == y.rank;
    }
    if (!same) broken(a, "its token placement differs from the input's, but it declares that it keeps it");
  }
}

}  // namespace fulcrum
