#include "mtraining_problem.hpp"

#include "fulcrum/kernels/columns.hpp"

#include <algorithm>

namespace fulcrum::bench {

SyntheticDocument::SyntheticDocument(std::uint64_t seed, int q_heads, int head_dim, Tokens length)
    : data(seed, q_heads, 1, head_dim, length) {
  const Range all{0, length};
  q = data.rows(sparse::SyntheticTensor::kQ, all);
  k = data.rows(sparse::SyntheticTensor::kK, all);
  v = data.rows(sparse::SyntheticTensor::kV, all);
  d_o = data.rows(sparse::SyntheticTensor::kDO, all);
  positions.resize(static_cast<std::size_t>(length));
  for (Tokens p = 0; p < length; ++p) positions[static_cast<std::size_t>(p)] = p;
}

sparse::VerticalSlashEstimate SyntheticDocument::estimate(const sparse::VerticalSlashOptions& options) const {
  const sparse::EstimatorShape shape{q_heads(), 1, head_dim()};
  // The observation rows are the document's last `window` Q rows, contiguous in token-major storage.
  const auto row = static_cast<std::size_t>(q_heads()) * static_cast<std::size_t>(head_dim());
  const std::span<const float> q_obs = std::span(q).subspan(static_cast<std::size_t>(length() - options.window) * row,
                                                            static_cast<std::size_t>(options.window) * row);
  return sparse::estimate_vertical_slash(shape, length(), q_obs, {k, positions}, options);
}

std::vector<MaskSpec> vsblocks_masks(const sparse::VerticalSlashEstimate& estimate) {
  std::vector<MaskSpec> masks;
  for (const auto& index : estimate.heads) {
    masks.push_back(MaskSpec::vertical_slash_blocks(index.block, index.verticals, index.block_offsets));
  }
  return masks;
}

double sparsity(std::span<const MaskSpec> masks, Tokens length) {
  double kept = 0;
  for (const auto& mask : masks) kept += static_cast<double>(mask.document_pairs(length));
  const double causal = static_cast<double>(MaskSpec::causal().document_pairs(length));
  return 1 - kept / (causal * static_cast<double>(masks.size()));
}

ActiveTiles active_tiles(std::span<const MaskSpec> masks, Tokens length) {
  constexpr Tokens kTile = kernels::kColumnChunk;
  ActiveTiles out;
  const std::vector<float> rows(static_cast<std::size_t>(length * kTile), 0.0f);  // K/V the gathering copies
  for (const auto& mask : masks) {
    const MaskSpec rest = mask.split_columns(length).rest;
    for (Tokens q0 = 0; q0 < length; q0 += kTile) {
      const Range queries{q0, std::min(length, q0 + kTile)};
      for (Tokens k0 = 0; k0 < length; k0 += kTile) {
        const Range keys{k0, std::min(length, k0 + kTile)};
        if (rest.classify(queries, keys, length) == TileKind::kEmpty) continue;
        (mask.classify(queries, keys, length) == TileKind::kFull ? out.full : out.partial) += 1;
        out.active_pairs += static_cast<double>(queries.size() * keys.size());
      }
    }
    auto tasks = kernels::sharded_document(length, length, mask);
    const kernels::CallColumns call(tasks, 1, 1, rows.data(), rows.data(), length, kTile);
    const kernels::HeadColumns* columns = call.of(0, 0);
    if (columns == nullptr) continue;
    Tokens sources[kTile];
    std::uint64_t bits[kTile];
    for (Tokens q0 = 0, tile = 0; q0 < length; q0 += kTile, ++tile) {
      const Tokens nq = std::min(length, q0 + kTile) - q0;
      for (Tokens i = 0; i < nq; ++i) sources[i] = mask.source_position(q0 + i, length);
      for (int c = 0; c < columns->chunks; ++c) {
        if (!columns->tile_bits(static_cast<int>(tile), c, sources, nq, bits)) continue;
        out.partial += 1;
        const auto nk = std::min<Tokens>(kTile, static_cast<Tokens>(columns->rows.size()) - c * kTile);
        out.active_pairs += static_cast<double>(nq * nk);
      }
    }
  }
  return out;
}

namespace {

// Rows of `source` ([length][heads][dim], original positions) in the slot order of `layout`.
std::vector<float> in_slot_order(const std::vector<float>& source, const MaskSpec& layout, Tokens length) {
  const std::size_t row = source.size() / static_cast<std::size_t>(length);
  std::vector<float> out(source.size());
  for (Tokens slot = 0; slot < length; ++slot) {
    const auto from = static_cast<std::size_t>(layout.source_position(slot, length)) * row;
    std::copy_n(source.begin() + static_cast<std::ptrdiff_t>(from), row,
                out.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(slot) * row));
  }
  return out;
}

}  // namespace

AttentionBuffers::AttentionBuffers(const SyntheticDocument& doc, const MaskSpec& layout)
    : shape_{doc.q_heads(), 1, doc.head_dim(), 0},
      length_(doc.length()),
      q_(in_slot_order(doc.q, layout, length_)),
      k_(in_slot_order(doc.k, layout, length_)),
      v_(in_slot_order(doc.v, layout, length_)),
      d_o_(in_slot_order(doc.d_o, layout, length_)),
      o_(q_.size()),
      lse_(static_cast<std::size_t>(length_) * static_cast<std::size_t>(shape_.q_heads)),
      dq_(q_.size()),
      dk_(k_.size()),
      dv_(v_.size()) {}

std::vector<kernels::AttentionTask> AttentionBuffers::document_task(std::span<const MaskSpec> masks) const {
  auto tasks = kernels::sharded_document(length_, length_, masks.front());
  tasks.front().head_masks = masks;
  return tasks;
}

void AttentionBuffers::forward(std::span<const kernels::AttentionTask> tasks) {
  const int h = shape_.q_heads, d = shape_.head_dim;
  kernels::attention_forward<float>(tasks, shape_, {q_.data(), length_, h, d}, {k_.data(), length_, 1, d},
                                    {v_.data(), length_, 1, d}, {o_.data(), length_, h, d},
                                    {lse_.data(), length_, h, 1});
}

void AttentionBuffers::backward(std::span<const kernels::AttentionTask> tasks) {
  const int h = shape_.q_heads, d = shape_.head_dim;
  kernels::attention_backward<float>(
      tasks, shape_, {q_.data(), length_, h, d}, {k_.data(), length_, 1, d}, {v_.data(), length_, 1, d},
      {o_.data(), length_, h, d}, {d_o_.data(), length_, h, d}, {lse_.data(), length_, h, 1},
      {dq_.data(), length_, h, d}, {dk_.data(), length_, 1, d}, {dv_.data(), length_, 1, d});
}

}  // namespace fulcrum::bench
