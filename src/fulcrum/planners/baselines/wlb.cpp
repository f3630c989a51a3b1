#include "fulcrum/planners/baselines/wlb.hpp"

#include "fulcrum/cost/attention_cost.hpp"
#include "fulcrum/cost/model_cost.hpp"

#include <algorithm>
#include <cmath>

namespace fulcrum {

PlannerCapabilities WlbPlanner::capabilities() const {
  return {.moves_attention = false,
          .splits_documents = false,  // except documents longer than S_max, cut into S_max pieces
          .keeps_documents = false,
          .keeps_placement = false,
          .masks = all_mask_kinds()};  // band masks exactly; index-list masks over their causal hull
}

std::size_t WlbPlanner::deferred_documents() const {
  std::size_t n = carried_.size();
  for (const auto& q : outliers_) n += q.size();
  return n;
}

Tokens WlbPlanner::deferred_tokens() const {
  Tokens n = 0;
  for (const auto& d : carried_) n += d.length;
  for (const auto& q : outliers_) {
    for (const auto& d : q) n += d.length;
  }
  return n;
}

Assignment WlbPlanner::plan(const Batch& batch) {
  options_.validate(batch.tokens_per_rank);
  const int ranks = batch.ranks;
  const auto cap = static_cast<Tokens>(std::floor(options_.wlb_token_cap * static_cast<double>(batch.tokens_per_rank)));
  const double linear = linear_forward_flops_per_token(options_.model);
  auto work = [&](const Document& d) {
    return attention_forward_flops(options_.model, d.mask, std::array<Range, 1>{Range{0, d.length}}, {0, d.length},
                                   d.length) +
           linear * static_cast<double>(d.length);
  };

  // Incoming documents: last iteration's leftovers first, then this batch's (cut to S_max pieces).
  std::vector<Document> regular = std::move(carried_);
  carried_.clear();
  for (const auto& d : batch.documents) {
    for (Tokens offset = 0; offset < d.length; offset += cap) {
      Document piece = d;
      piece.length = std::min(cap, d.length - offset);
      // Route outliers to the highest level whose threshold (S_max/4, S_max/2) the piece reaches.
      int level = -1;
      for (int l = 0; l < kOutlierLevels; ++l) {
        if (piece.length >= (cap >> (kOutlierLevels - l))) level = l;
      }
      if (level >= 0) {
        outliers_[level].push_back(piece);
      } else {
        regular.push_back(piece);
      }
    }
  }

  std::vector<std::vector<Document>> bins(static_cast<std::size_t>(ranks));
  std::vector<double> load(static_cast<std::size_t>(ranks), 0.0);
  std::vector<Tokens> tokens(static_cast<std::size_t>(ranks), 0);
  auto least_loaded_fitting = [&](Tokens length) {
    int best = -1;
    for (int r = 0; r < ranks; ++r) {
      if (tokens[r] + length <= cap && (best < 0 || load[r] < load[best])) best = r;
    }
    return best;
  };
  // A level releases its outliers once it holds a full round: one per micro-batch, the longest going
  // to the least-loaded micro-batch.
  std::vector<Document> placing;
  for (auto& queue : outliers_) {
    while (static_cast<int>(queue.size()) >= ranks || (draining_ && !queue.empty())) {
      const auto n = static_cast<std::ptrdiff_t>(std::min<std::size_t>(queue.size(), static_cast<std::size_t>(ranks)));
      std::vector<Document> round(queue.begin(), queue.begin() + n);
      queue.erase(queue.begin(), queue.begin() + n);
      std::stable_sort(round.begin(), round.end(), [](const Document& x, const Document& y) { return x.length > y.length; });
      for (auto& d : round) placing.push_back(d);
    }
  }
  std::stable_sort(regular.begin(), regular.end(), [](const Document& x, const Document& y) { return x.length > y.length; });
  placing.insert(placing.end(), regular.begin(), regular.end());
  for (const auto& d : placing) {
    const int r = least_loaded_fitting(d.length);
    if (r < 0) {
      carried_.push_back(d);  // no micro-batch has room: the document waits for the next iteration
      continue;
    }
    bins[r].push_back(d);
    load[r] += work(d);
    tokens[r] += d.length;
  }

  Assignment a{.planner = "wlb", .batch = {}, .tasks = {}, .transfers = {}};
  a.batch.ranks = ranks;
  a.batch.tokens_per_rank = batch.tokens_per_rank;
  for (int r = 0; r < ranks; ++r) {
    for (const auto& d : bins[r]) {
      const int index = static_cast<int>(a.batch.documents.size());
      a.batch.documents.push_back(d);
      a.batch.segments.push_back({index, {0, d.length}, r});
      const Range rows[] = {Range{0, d.length}};
      a.tasks.push_back({index, {rows[0], Range{}}, visible_key_hull(d, rows), r});
    }
  }
  return a;
}

}  // namespace fulcrum
