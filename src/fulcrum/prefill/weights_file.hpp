// The prefill's weights on disk: one file per model, written once from a seed and read by every rank.
//
// Layout (little-endian; every tensor is rows of `hidden` fp32 values, so a tensor's rows are addressed
// the same way whatever it is):
//   header, 64 bytes: magic "FULCRUMW", u32 version (1), u32 dtype (0 = fp32), i32 layers, hidden,
//                     q_heads, kv_heads, head_dim, ffn_hidden, u64 seed, zero padding
//   per layer l, contiguous, in this order (rows x hidden):
//     attn_norm [1], w_q [q_heads·head_dim], w_k [kv_heads·head_dim], w_v [kv_heads·head_dim],
//     w_o [q_heads·head_dim], mlp_norm [1], w_gate [ffn], w_up [ffn], w_down [ffn]
//   final_norm [1] (as "layer" `layers`)
// w_q, w_k, w_v, w_gate and w_up are [out][in] (PyTorch's Linear layout: q = x · w_qᵀ); w_o and w_down are
// stored [in][out] (y = attn · w_o), i.e. Hugging Face's o_proj / down_proj transposed, so that one q head's
// w_o rows and one rank's FFN rows are contiguous like its w_q rows. Head h owns rows [h·d, (h+1)·d) of
// w_q and w_o; KV group g rows [g·d, (g+1)·d) of w_k and w_v.
//
// Random weights: U(-a, a) with a = sqrt(3 / fan_in) (variance 1 / fan_in: fan_in is hidden for w_q, w_k,
// w_v, w_gate, w_up, q_heads·head_dim for w_o, ffn for w_down); norm gains U(0.9, 1.1). Each tensor of
// each layer is its own stream, Rng(mix64(seed, layer, tensor)).
#pragma once

#include "fulcrum/workload/model_shape.hpp"

#include <cstdint>
#include <string>

namespace fulcrum::prefill {

enum class WeightTensor { kAttnNorm, kWq, kWk, kWv, kWo, kMlpNorm, kWgate, kWup, kWdown, kCount };
const char* to_string(WeightTensor tensor);

/// Where each tensor's rows are: row offsets inside a layer, and the file's size.
class WeightsLayout {
 public:
  explicit WeightsLayout(const ModelShape& shape);
  static constexpr std::int64_t kHeaderBytes = 64;

  std::int64_t rows(WeightTensor tensor) const { return rows_[static_cast<int>(tensor)]; }
  /// Byte offset of row `row` of `tensor` in layer `layer` (layer == layers: the final norm).
  std::int64_t offset_bytes(int layer, WeightTensor tensor, std::int64_t row) const;
  std::int64_t file_bytes() const;
  int hidden() const { return hidden_; }

 private:
  int layers_ = 0;
  int hidden_ = 0;
  std::int64_t rows_[static_cast<int>(WeightTensor::kCount)] = {};
  std::int64_t row_begin_[static_cast<int>(WeightTensor::kCount)] = {};
  std::int64_t layer_rows_ = 0;
};

/// Writes the seeded random weights of `shape` to `path` (through a temporary file renamed at the end,
/// so an interrupted write never leaves a file that looks complete). Bad input if it cannot be written.
void write_random_weights(const std::string& path, const ModelShape& shape, std::uint64_t seed);

/// An open weights file whose header matched the model. Reads are pread()s: any thread may read.
class WeightsFile {
 public:
  /// Errors (bad input, one line naming the file and the field): cannot be read; header.magic /
  /// header.version / header.dtype wrong; header.<size> differing from the model's; size (bytes) not the
  /// header's model's.
  WeightsFile(const std::string& path, const ModelShape& shape);
  ~WeightsFile();
  WeightsFile(const WeightsFile&) = delete;
  WeightsFile& operator=(const WeightsFile&) = delete;

  const std::string& path() const { return path_; }
  const WeightsLayout& layout() const { return layout_; }
  std::uint64_t seed() const { return seed_; }
  /// Rows [row, row + count) of `tensor` in `layer` into `out` (count · hidden floats). A failed read is a
  /// runtime Error naming the file, layer and tensor.
  void read_rows(int layer, WeightTensor tensor, std::int64_t row, std::int64_t count, float* out) const;

 private:
  std::string path_;
  WeightsLayout layout_;
  std::uint64_t seed_ = 0;
  int fd_ = -1;
};

}  // namespace fulcrum::prefill
