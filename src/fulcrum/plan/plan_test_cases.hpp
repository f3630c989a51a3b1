// Random Assignments for the compile, verify and executor tests: small seeded batches on 1-4 ranks
// whose documents' rows are cut into tasks (single ranges and head+tail pairs) on random servers, some
// of them with their keys split in two at a random point, so rows are merged from two servers.
// Test-only.
#pragma once

#include "fulcrum/core/random.hpp"
#include "fulcrum/plan/assignment.hpp"
#include "fulcrum/plan/program.hpp"

#include <algorithm>
#include <vector>

namespace fulcrum::testing {

/// `batch` with every document's length rounded down to a multiple of `multiple` (documents that round
/// to nothing left out), packed again on the same ranks: a batch a striped planner accepts.
inline Batch with_length_multiple(const Batch& batch, Tokens multiple) {
  std::vector<Document> docs;
  for (const auto& d : batch.documents) {
    if (d.length / multiple > 0) docs.push_back({d.id, d.length / multiple * multiple, d.mask, d.head_masks});
  }
  if (docs.empty())
    docs.push_back({0, multiple, batch.documents.empty() ? MaskSpec::causal() : batch.documents[0].mask, {}});
  Tokens total = 0;
  for (const auto& d : docs) total += d.length;
  return pack_batch(docs, batch.ranks, std::max(batch.tokens_per_rank, (total + batch.ranks - 1) / batch.ranks));
}

inline Assignment random_assignment(std::uint64_t seed, const MaskSpec& mask, int max_ranks = 4) {
  Rng rng(seed);
  const int ranks = static_cast<int>(rng.uniform_int(1, max_ranks));
  const Tokens per_rank = rng.uniform_int(8, 160);
  std::vector<Document> docs;
  for (Tokens total = 0; total < ranks * per_rank;) {
    const Tokens len = std::min(rng.uniform_int(1, 2 * per_rank), ranks * per_rank - total);  // the last fits
    docs.push_back({static_cast<std::int64_t>(docs.size()), len, mask});
    total += len;
  }
  Assignment a;
  a.planner = "random";
  a.batch = pack_batch(docs, ranks, per_rank);
  for (int d = 0; d < static_cast<int>(a.batch.documents.size()); ++d) {
    const Tokens len = a.batch.documents[d].length;
    std::vector<Tokens> cuts = {0, len};
    for (int i = static_cast<int>(rng.uniform_int(0, 3)); i > 0; --i) cuts.push_back(rng.uniform_int(0, len));
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    std::vector<Range> pieces;
    for (std::size_t i = 0; i + 1 < cuts.size(); ++i) pieces.push_back({cuts[i], cuts[i + 1]});
    while (!pieces.empty()) {
      CATask t;
      t.doc = d;
      t.queries[0] = pieces.front();
      pieces.erase(pieces.begin());
      if (!pieces.empty() && rng.uniform() < 0.5) {  // a head+tail pair, as DistCA's shards are
        t.queries[1] = pieces.back();
        pieces.pop_back();
      }
      t.keys = {0, len};
      t.server = static_cast<int>(rng.uniform_int(0, ranks - 1));
      if (len > 1 && rng.uniform() < 0.4) {  // split the keys over two servers
        const Tokens m = rng.uniform_int(1, len - 1);
        CATask second = t;
        t.keys = {0, m};
        second.keys = {m, len};
        second.server = static_cast<int>(rng.uniform_int(0, ranks - 1));
        a.tasks.push_back(second);
      }
      a.tasks.push_back(t);
    }
  }
  a.transfers = minimal_transfers(a.batch, a.tasks);
  return a;
}

/// random_assignment with heads: every document gets one mask per q head (drawn from causal, a sliding
/// window and a lambda mask, so one document mixes them), and every task is cut into 1..3 tasks over
/// disjoint head ranges, each on a random server (several servers then compute parts of one row).
inline Assignment random_head_assignment(std::uint64_t seed, int q_heads, int max_ranks = 4) {
  Assignment a = random_assignment(seed, MaskSpec::causal(), max_ranks);
  Rng rng(seed ^ 0x4845414453ull);
  a.q_heads = q_heads;
  for (auto& doc : a.batch.documents) {
    const Tokens w = rng.uniform_int(1, std::max<Tokens>(1, doc.length / 2));
    const MaskSpec kinds[] = {MaskSpec::causal(), MaskSpec::sliding_window(w),
                              MaskSpec::lambda(rng.uniform_int(0, 8), w)};
    for (int h = 0; h < q_heads; ++h) doc.head_masks.push_back(kinds[rng.uniform_int(0, 2)]);
  }
  std::vector<CATask> tasks;
  for (const auto& t : a.tasks) {
    std::vector<int> cuts = {0, q_heads};
    for (int i = static_cast<int>(rng.uniform_int(0, 2)); i > 0; --i) {
      cuts.push_back(static_cast<int>(rng.uniform_int(1, q_heads)));
    }
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    for (std::size_t c = 0; c + 1 < cuts.size(); ++c) {
      CATask part = t;
      if (cuts.size() > 2) part.heads = {cuts[c], cuts[c + 1]};
      part.server = static_cast<int>(rng.uniform_int(0, a.batch.ranks - 1));
      tasks.push_back(part);
    }
  }
  a.tasks = std::move(tasks);
  a.transfers = minimal_transfers(a.batch, a.tasks);
  return a;
}

/// A hand-built head-split Assignment on `ranks` ranks (4 q heads): three documents whose heads have
/// different masks (causal on heads 0-1, a sliding window on head 2, a lambda mask on head 3). Per
/// document, heads [0, 2) of all rows run on one server; heads [2, 4) of the first rows on a second;
/// heads [2, 4) of the last rows are split over keys between a third and a fourth server.
/// Per document of `a.batch`: q heads [0, split) of all rows on one server; heads [split, q_heads) of the
/// first third of the rows on a second, and of the rest split over keys between a third and a fourth
/// (servers rotate with the document, modulo `ranks`).
inline void add_head_split_tasks(Assignment& a, int ranks, int split) {
  for (int d = 0; d < static_cast<int>(a.batch.documents.size()); ++d) {
    const Tokens len = a.batch.documents[d].length;
    const Tokens m = len / 3, k = len / 2;
    auto server = [&](int i) { return (d + i) % ranks; };
    a.tasks.push_back({d, {Range{0, len}, Range{}}, {0, len}, server(0), -1, {0, split}});
    a.tasks.push_back({d, {Range{0, m}, Range{}}, {0, len}, server(1), -1, {split, a.q_heads}});
    a.tasks.push_back({d, {Range{m, len}, Range{}}, {0, k}, server(2), -1, {split, a.q_heads}});
    a.tasks.push_back({d, {Range{m, len}, Range{}}, {k, len}, server(3), -1, {split, a.q_heads}});
  }
}

inline Assignment head_split_assignment(int ranks) {
  const Tokens per_rank = 128;  // ranks >= 2
  std::vector<Document> docs = {
      {0, 150, MaskSpec::causal()}, {1, 60, MaskSpec::causal()}, {2, ranks * per_rank - 210, MaskSpec::causal()}};
  for (auto& d : docs) {
    d.head_masks = {MaskSpec::causal(), MaskSpec::causal(), MaskSpec::sliding_window(24), MaskSpec::lambda(4, 16)};
  }
  Assignment a;
  a.planner = "head-split";
  a.q_heads = 4;
  a.batch = pack_batch(docs, ranks, per_rank);
  add_head_split_tasks(a, ranks, 2);
  a.transfers = minimal_transfers(a.batch, a.tasks);
  return a;
}

/// A GQA head-split Assignment on `ranks` ranks (>= 2) for 8 q heads over 2 kv heads (groups of 4): per
/// document, q heads [0, split) of all rows run on one server and heads [split, 8) on others, the last
/// rows of those split again over keys between two servers (merged by LSE at the owner). split 4 cuts at
/// the kv groups' edge; split 3 cuts kv head 0's group, so two servers read kv head 0 of the same keys.
inline Assignment gqa_head_split_assignment(int ranks, int split) {
  const Tokens per_rank = 96;
  std::vector<Document> docs = {{0, 130, MaskSpec::causal()},
                                {1, 50, MaskSpec::sliding_window(20)},
                                {2, ranks * per_rank - 180, MaskSpec::causal()}};
  Assignment a;
  a.planner = "gqa-head-split";
  a.q_heads = 8;
  a.batch = pack_batch(docs, ranks, per_rank);
  add_head_split_tasks(a, ranks, split);
  a.transfers = minimal_transfers(a.batch, a.tasks, 4);
  return a;
}

/// Bytes a plan's messages carry (each counted once, at its send): their heads only, or, with
/// `whole_rows`, every head of their rows (what the same messages moved before slices had heads).
inline double message_bytes(const Plan& plan, bool whole_rows = false) {
  double total = 0;
  for (const auto& p : plan.programs) {
    for (const auto& in : p.instructions) {
      const auto* l = std::get_if<CommLaunch>(&in.op);
      if (!l) continue;
      for (const auto& m : l->sends) {
        Slice s = m.slice;
        if (whole_rows) s.heads = {};
        total += static_cast<double>(plan.heads.bytes(p.buffers[s.buffer].field, s));
      }
    }
  }
  return total;
}

}  // namespace fulcrum::testing
