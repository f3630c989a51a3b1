#include "fulcrum/plan/stats.hpp"

#include "fulcrum/cost/attention_cost.hpp"

#include <algorithm>
#include <map>
#include <numeric>

namespace fulcrum {

double max_over_mean(const std::vector<double>& values) {
  if (values.empty()) return 1.0;
  const double sum = std::accumulate(values.begin(), values.end(), 0.0);
  if (sum <= 0) return 1.0;
  return *std::max_element(values.begin(), values.end()) / (sum / static_cast<double>(values.size()));
}

double transfer_bytes(const Transfer& transfer, const ModelShape& model) {
  const auto bytes = token_bytes(model);
  // A transfer moves its q heads' share of a row: Q, O and LSE per q head, K/V per kv head they read.
  const double q_share = transfer.heads.count(model.q_heads) / static_cast<double>(model.q_heads);
  const double kv_share = kv_heads_read(transfer.heads, model.q_heads, model.kv_heads).count(model.kv_heads) /
                          static_cast<double>(model.kv_heads);
  const double per_token = transfer.kind == TensorKind::kQ    ? bytes.q * q_share
                           : transfer.kind == TensorKind::kKV ? bytes.kv * kv_share
                                                              : bytes.output() * q_share;
  return per_token * static_cast<double>(transfer.tokens.size());
}

double placement_imbalance(const Batch& batch, const ModelShape& model) {
  std::vector<double> flops(static_cast<std::size_t>(batch.ranks), 0.0);
  for (const auto& s : batch.segments) {
    const auto& doc = batch.documents[s.doc];
    const Range rows[] = {s.tokens};
    flops[s.rank] += attention_forward_flops(model, doc.mask, rows, {0, doc.length}, doc.length);
  }
  return max_over_mean(flops);
}

namespace {

// Distinct remote tokens per rank: the explicit transfers it receives (per document) together with the
// broadcasts of other ranks. Most ranks neither send a broadcast of a document nor receive it
// explicitly; each of those receives exactly the union of its broadcasts, so that is counted once per
// document for all of them (ranks x documents sets would not fit at thousands of ranks).
void add_remote_tokens(std::map<std::pair<int, int>, RangeSet>& received,
                       const std::map<int, std::vector<const Transfer*>>& broadcasts, std::vector<double>& remote) {
  std::map<int, std::vector<int>> explicit_ranks;  // doc -> ranks with explicit transfers of it
  double common = 0;                               // what every rank receives by broadcast
  for (const auto& [key, set] : received) explicit_ranks[key.second].push_back(key.first);
  for (const auto& [doc, list] : broadcasts) {
    std::vector<int> exact;  // ranks whose set differs from the union: senders, explicit receivers
    for (const Transfer* b : list) exact.push_back(b->src);
    if (const auto it = explicit_ranks.find(doc); it != explicit_ranks.end())
      exact.insert(exact.end(), it->second.begin(), it->second.end());
    std::sort(exact.begin(), exact.end());
    exact.erase(std::unique(exact.begin(), exact.end()), exact.end());
    RangeSet all;
    for (const Transfer* b : list) all.add(b->tokens);
    const auto everyone = static_cast<double>(all.size());
    common += everyone;
    for (int r : exact) {
      RangeSet& set = received[{r, doc}];
      for (const Transfer* b : list) {
        if (b->src != r) set.add(b->tokens);
      }
      remote[r] += static_cast<double>(set.size()) - everyone;
      set = RangeSet{};  // counted
    }
  }
  for (const auto& [key, set] : received) remote[key.first] += static_cast<double>(set.size());
  for (auto& tokens : remote) tokens += common;  // whole token counts: exact in any order
}

}  // namespace

AssignmentStats compute_stats(const Assignment& a, const ModelShape& model) {
  const auto ranks = static_cast<std::size_t>(a.batch.ranks);
  AssignmentStats s;
  s.rank_flops.assign(ranks, 0.0);
  s.rank_tokens_held.assign(ranks, 0.0);
  s.rank_remote_tokens.assign(ranks, 0.0);
  s.rank_bytes_sent.assign(ranks, 0.0);
  s.rank_bytes_received.assign(ranks, 0.0);
  s.tasks = a.tasks.size();
  for (const auto& task : a.tasks) {
    const auto& doc = a.batch.documents[task.doc];
    const auto runs = mask_runs(doc.mask, doc.head_masks, task.heads);
    s.rank_flops[task.server] +=
        attention_forward_flops(model.head_dim, model.q_heads, runs, task.query_ranges(), task.keys, doc.length);
  }
  for (const auto& segment : a.batch.segments)
    s.rank_tokens_held[segment.rank] += static_cast<double>(segment.tokens.size());
  std::map<std::pair<int, int>, RangeSet> received;        // (rank, doc) -> remote tokens received for attention
  std::map<int, std::vector<const Transfer*>> broadcasts;  // doc -> its broadcasts of Q or K/V
  for (const auto& t : a.transfers) {
    const double bytes = transfer_bytes(t, model);
    if (t.broadcast()) {
      // Added once per receiver, in rank order, as that many point-to-point transfers would add up.
      for (std::size_t r = 0; r < ranks; ++r) {
        if (static_cast<int>(r) == t.src) continue;
        s.rank_bytes_sent[t.src] += bytes;
        s.rank_bytes_received[r] += bytes;
        s.comm_bytes_total += bytes;
      }
      if (t.kind != TensorKind::kOut) broadcasts[t.doc].push_back(&t);
      continue;
    }
    s.rank_bytes_sent[t.src] += bytes;
    s.rank_bytes_received[t.dst] += bytes;
    s.comm_bytes_total += bytes;
    if (t.kind != TensorKind::kOut) received[{t.dst, t.doc}].add(t.tokens);
  }
  add_remote_tokens(received, broadcasts, s.rank_remote_tokens);
  s.imbalance = max_over_mean(s.rank_flops);
  s.memory_imbalance = max_over_mean(s.rank_tokens_held);
  std::vector<double> rank_traffic(ranks);
  for (std::size_t r = 0; r < ranks; ++r) {
    rank_traffic[r] = s.rank_bytes_sent[r] + s.rank_bytes_received[r];
    s.comm_bytes_max_rank = std::max({s.comm_bytes_max_rank, s.rank_bytes_sent[r], s.rank_bytes_received[r]});
    s.remote_tokens_max_rank = std::max(s.remote_tokens_max_rank, s.rank_remote_tokens[r]);
  }
  s.traffic_imbalance = max_over_mean(rank_traffic);
  return s;
}

}  // namespace fulcrum
