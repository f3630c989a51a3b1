#include "fulcrum/cost/model_cost.hpp"

#include "fulcrum/cost/attention_cost.hpp"

#include <array>

namespace fulcrum {

double linear_forward_flops_per_token(const ModelShape& m) {
  const double qkv = static_cast<double>(m.hidden) * (m.q_heads + 2.0 * m.kv_heads) * m.head_dim;
  const double out = static_cast<double>(m.q_heads) * m.head_dim * m.hidden;
  const double mlp = 3.0 * m.hidden * m.ffn_hidden;  // gate, up and down projections
  return 2.0 * (qkv + out + mlp);                    // one multiply-add = 2 FLOPs
}

double document_forward_flops(const ModelShape& model, const Document& doc) {
  const std::array<Range, 1> rows{Range{0, doc.length}};
  return attention_forward_flops(model, doc.mask, rows, rows[0], doc.length) +
         linear_forward_flops_per_token(model) * static_cast<double>(doc.length);
}

double activation_bytes_per_token(const ModelShape& m) {
  // Kept for backward: the inputs of the two norms (2h), Q/K/V, the attention output, the MLP's gate and
  // up outputs and the SwiGLU product (3 * ffn), in the activation dtype; plus the fp32 LSE per q head.
  const double elements = 2.0 * m.hidden + (m.q_heads + 2.0 * m.kv_heads) * m.head_dim +
                          static_cast<double>(m.q_heads) * m.head_dim + 3.0 * m.ffn_hidden;
  return elements * m.dtype_bytes + lse_bytes_per_token(m);
}

double lse_bytes_per_token(const ModelShape& m) { return 4.0 * m.q_heads; }

}  // namespace fulcrum
