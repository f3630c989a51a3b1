#include "fulcrum/planners/baselines/wlb.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/cost/model_cost.hpp"

#include <algorithm>
#include <cmath>

namespace fulcrum {

namespace {

const OptionSpec kTokenCap{.name = "wlb-token-cap",
                           .help = "wlb: micro-batch token cap S_max, in units of tokens-per-rank",
                           .default_value = 1.5,
                           .min = 1,
                           .max = 1000};

}  // namespace

WlbPlanner::WlbPlanner(const PlannerOptions& options)
    : model_(options.model),
      token_cap_(options.get(kTokenCap)),
      cp_(std::max(1, options.get_int(cp_degree_option()))) {}

Tokens WlbPlanner::longest_whole_document(Tokens tokens_per_rank, int cp) const {
  return static_cast<Tokens>(std::floor(token_cap_ * static_cast<double>(tokens_per_rank * cp)));
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

std::vector<std::vector<Document>> WlbPlanner::held_documents() const {
  std::vector<std::vector<Document>> held;
  for (const auto& q : outliers_) held.emplace_back(q.begin(), q.end());
  held.push_back(carried_);
  return held;
}

void WlbPlanner::restore_held_documents(const std::vector<std::vector<Document>>& held) {
  FULCRUM_CHECK(held.size() == kOutlierLevels + 1, "wlb: held documents of another planner");
  for (int l = 0; l < kOutlierLevels; ++l) outliers_[l].assign(held[l].begin(), held[l].end());
  carried_ = held[kOutlierLevels];
}

Assignment WlbPlanner::do_plan(const Batch& batch) {
  if (cp_ == 1) return pack(batch);
  if (batch.ranks % cp_ != 0) fail("cp-degree = {}: must divide the batch's {} ranks (wlb)", cp_, batch.ranks);
  // WLB-LLM packs documents into one micro-batch per CP group ...
  Batch groups = batch;
  groups.ranks = batch.ranks / cp_;
  groups.tokens_per_rank = batch.tokens_per_rank * cp_;
  for (auto& s : groups.segments) s.rank /= cp_;
  const Assignment packed = pack(groups);
  // ... whose documents per-document CP then spreads over the group's cp ranks (it re-cuts every
  // document a group holds into 2 cp chunks, so placing them on the group's first rank suffices).
  Batch spread = packed.batch;
  spread.ranks = batch.ranks;
  spread.tokens_per_rank = batch.tokens_per_rank;
  for (auto& s : spread.segments) s.rank *= cp_;
  return per_document_cp(spread, cp_);
}

Assignment WlbPlanner::pack(const Batch& batch) {
  const int ranks = batch.ranks;
  const Tokens cap = longest_whole_document(batch.tokens_per_rank, 1);
  auto work = [&](const Document& d) { return document_forward_flops(model_, d); };

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
      std::stable_sort(round.begin(), round.end(),
                       [](const Document& x, const Document& y) { return x.length > y.length; });
      for (auto& d : round) placing.push_back(d);
    }
  }
  std::stable_sort(regular.begin(), regular.end(),
                   [](const Document& x, const Document& y) { return x.length > y.length; });
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

  Assignment a{.planner = {}, .batch = {}, .tasks = {}, .transfers = {}};
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

PlannerRegistration wlb_registration() {
  return {.name = "wlb",
          .summary = "WLB-LLM: whole documents packed per CP group by estimated work, outliers delayed",
          .capabilities = {.moves_attention = false,
                           .splits_documents = true,  // with cp > 1 (per-document CP), and pieces longer than S_max
                           .keeps_documents = false,
                           .defers_documents = true,
                           .keeps_placement = false,
                           .masks = all_mask_kinds(),  // band masks exactly; index-list masks over their hull
                           .cp_groups = CpGroups::kHoldsDocuments},
          .options = {cp_degree_option(), kTokenCap},
          .make = [](const PlannerOptions& o) { return std::make_unique<WlbPlanner>(o); }};
}

}  // namespace fulcrum
