// The numbers `fulcrum plan` reports for an Assignment: compute and memory balance, traffic, tasks.
#pragma once

#include "fulcrum/plan/assignment.hpp"

#include <vector>

namespace fulcrum {

struct AssignmentStats {
  std::vector<double> rank_flops;          // forward core-attention FLOPs per server, per layer
  std::vector<double> rank_tokens_held;    // owned tokens: their activations stay for every layer
  std::vector<double> rank_remote_tokens;  // distinct remote Q/KV tokens received: one layer's buffers
  std::vector<double> rank_bytes_sent;
  std::vector<double> rank_bytes_received;
  double imbalance = 1.0;         // max / mean of rank_flops
  double memory_imbalance = 1.0;  // max / mean of rank_tokens_held
  double comm_bytes_total = 0;
  double comm_bytes_max_rank = 0;  // max over ranks of max(bytes sent, bytes received)
  double traffic_imbalance = 1.0;  // max / mean over ranks of bytes sent + received (1 with no traffic)
  double remote_tokens_max_rank = 0;
  std::size_t tasks = 0;
};

/// Bytes of a transfer's heads: its q heads' share of Q or O+LSE rows, or of K/V the kv heads they read.
double transfer_bytes(const Transfer& transfer, const ModelShape& model);
AssignmentStats compute_stats(const Assignment& assignment, const ModelShape& model);
/// max / mean forward FLOPs per rank when every rank computes the rows it holds: the balance the
/// batch's own placement gives (what the `packed` planner plans).
double placement_imbalance(const Batch& batch, const ModelShape& model);

/// max / mean of positive-sum values (1 for an all-zero vector).
double max_over_mean(const std::vector<double>& values);

}  // namespace fulcrum
