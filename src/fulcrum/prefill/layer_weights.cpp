#include "fulcrum/prefill/layer_weights.hpp"

#include <utility>

namespace fulcrum::prefill {
namespace {

std::size_t floats(std::int64_t rows, int hidden) {
  return static_cast<std::size_t>(rows) * static_cast<std::size_t>(hidden);
}

// The whole tensor, rows as stored.
void read_all(const WeightsFile& file, int layer, WeightTensor t, std::vector<float>& out) {
  const auto rows = file.layout().rows(t);
  out.resize(floats(rows, file.layout().hidden()));
  file.read_rows(layer, t, 0, rows, out.data());
}

// Blocks of d rows (block b = rows [b·d, (b+1)·d)), in the order given, contiguous in `out`.
void read_blocks(const WeightsFile& file, int layer, WeightTensor t, int d, const std::vector<int>& blocks,
                 std::vector<float>& out) {
  const int hidden = file.layout().hidden();
  out.resize(floats(static_cast<std::int64_t>(blocks.size()) * d, hidden));
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    file.read_rows(layer, t, static_cast<std::int64_t>(blocks[i]) * d, d,
                   out.data() + floats(static_cast<std::int64_t>(i) * d, hidden));
  }
}

}  // namespace

Range ffn_rows(int ffn_hidden, int ranks, int rank) {
  const auto f = static_cast<Tokens>(ffn_hidden);
  return {f * rank / ranks, f * (rank + 1) / ranks};
}

void load_attention(const WeightsFile& file, int layer, int head_dim, const RankHeads& heads, bool wpr,
                    AttentionWeights& out) {
  out.layer = layer;
  out.reorganised = wpr;
  read_all(file, layer, WeightTensor::kAttnNorm, out.norm);
  if (!wpr) {
    for (auto [t, buffer] : {std::pair{WeightTensor::kWq, &out.wq}, std::pair{WeightTensor::kWk, &out.wk},
                             std::pair{WeightTensor::kWv, &out.wv}, std::pair{WeightTensor::kWo, &out.wo}}) {
      read_all(file, layer, t, *buffer);
    }
    return;
  }
  read_blocks(file, layer, WeightTensor::kWq, head_dim, heads.heads, out.wq);
  read_blocks(file, layer, WeightTensor::kWk, head_dim, heads.groups, out.wk);
  read_blocks(file, layer, WeightTensor::kWv, head_dim, heads.groups, out.wv);
  read_blocks(file, layer, WeightTensor::kWo, head_dim, heads.heads, out.wo);
}

void load_mlp(const WeightsFile& file, int layer, Range ffn, MlpWeights& out) {
  const int hidden = file.layout().hidden();
  out.layer = layer;
  read_all(file, layer, WeightTensor::kMlpNorm, out.norm);
  for (auto [t, buffer] : {std::pair{WeightTensor::kWgate, &out.gate}, std::pair{WeightTensor::kWup, &out.up},
                           std::pair{WeightTensor::kWdown, &out.down}}) {
    buffer->resize(floats(ffn.size(), hidden));
    file.read_rows(layer, t, ffn.begin, ffn.size(), buffer->data());
  }
}

}  // namespace fulcrum::prefill
