// Random Assignments for the compile, verify and executor tests: small seeded batches on 1-4 ranks
// whose documents' rows are cut into tasks (single ranges and head+tail pairs) on random servers, some
// of them with their keys split in two at a random point, so rows are merged from two servers.
// Test-only.
#pragma once

#include "fulcrum/core/random.hpp"
#include "fulcrum/plan/assignment.hpp"

#include <algorithm>
#include <vector>

namespace fulcrum::testing {

inline Assignment random_assignment(std::uint64_t seed, const MaskSpec& mask, int max_ranks = 4) {
  Rng rng(seed);
  const int ranks = static_cast<int>(rng.uniform_int(1, max_ranks));
  const Tokens per_rank = rng.uniform_int(8, 160);
  std::vector<Document> docs;
  for (Tokens total = 0; total < ranks * per_rank;) {
    const Tokens len = rng.uniform_int(1, 2 * per_rank);
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

}  // namespace fulcrum::testing
