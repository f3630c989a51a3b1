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
  std::map<std::pair<int, int>, RangeSet> received;  // (rank, doc) -> remote tokens received for attention
  for (const auto& t : a.transfers) {
    const double bytes = transfer_bytes(t, model);
    s.rank_bytes_sent[t.src] += bytes;
    s.rank_bytes_received[t.dst] += bytes;
    s.comm_bytes_total += bytes;
    if (t.kind != TensorKind::kOut) received[{t.dst, t.doc}].add(t.tokens);
  }
  for (const auto& [key, set] : received) s.rank_remote_tokens[key.first] += static_cast<double>(set.size());
  s.imbalance = max_over_mean(s.rank_flops);
  s.memory_imbalance = max_over_mean(s.rank_tokens_held);
  for (std::size_t r = 0; r < ranks; ++r) {
    s.comm_bytes_max_rank = std::max({s.comm_bytes_max_rank, s.rank_bytes_sent[r], s.rank_bytes_received[r]});
    s.remote_tokens_max_rank = std::max(s.remote_tokens_max_rank, s.rank_remote_tokens[r]);
  }
  return s;
}

}  // namespace fulcrum
