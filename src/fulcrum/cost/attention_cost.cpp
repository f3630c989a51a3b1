#include "fulcrum/cost/attention_cost.hpp"

namespace fulcrum {

double attention_forward_flops_per_pair(const ModelShape& model) {
  return attention_flops_per_pair(model.head_dim, model.q_heads);
}

double attention_forward_flops(int head_dim, int q_heads, std::span<const MaskRun> runs, std::span<const Range> queries,
                               Range keys, Tokens doc_len) {
  double flops = 0;
  for (const auto& run : runs) {
    flops += attention_flops_per_pair(head_dim, run.heads.count(q_heads)) *
             static_cast<double>(attention_pairs(*run.mask, queries, keys, doc_len));
  }
  return flops;
}

Tokens attention_pairs(const MaskSpec& mask, std::span<const Range> queries, Range keys, Tokens doc_len) {
  Tokens pairs = 0;
  for (const auto& q : queries) pairs += mask.count_pairs(q, keys, doc_len);
  return pairs;
}

double attention_forward_flops(const ModelShape& model, const MaskSpec& mask, std::span<const Range> queries,
                               Range keys, Tokens doc_len) {
  return static_cast<double>(attention_pairs(mask, queries, keys, doc_len)) * attention_forward_flops_per_pair(model);
}

TokenBytes token_bytes(const ModelShape& model) {
  const double dtype = model.dtype_bytes;
  return {
      .q = dtype * model.q_heads * model.head_dim,
      .kv = 2.0 * dtype * model.kv_heads * model.head_dim,
      .o = dtype * model.q_heads * model.head_dim,
      .lse = 4.0 * model.q_heads,
  };
}

}  // namespace fulcrum
