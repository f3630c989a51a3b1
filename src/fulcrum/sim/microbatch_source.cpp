#include "fulcrum/sim/microbatch_source.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>

namespace fulcrum::sim {

MicrobatchSource::MicrobatchSource(const TrainingConfig& c, int ranks, const ModelShape& model)
    : lengths_(make_length_source(c.dataset, c.seed, c.max_doc_len)),
      dynamic_(sparse::parse_dynamic_mask(c.mask)),
      stream_([this, max = c.max_doc_len] { return next_piece(max); }, ranks, c.rank_tokens(),
              dynamic_ ? MaskSpec::causal() : MaskSpec::parse(c.mask), c.boundary_split),
      seed_(c.seed),
      shape_{model.q_heads, model.kv_heads, model.head_dim} {}

Batch MicrobatchSource::next() {
  Batch batch = stream_.next();
  if (dynamic_) {
    for (auto& doc : batch.documents) {
      if (sparse::estimates(*dynamic_, doc.length)) doc.head_masks = dynamic_masks(doc);
    }
  }
  return batch;
}

Tokens MicrobatchSource::next_piece(Tokens max) {
  if (pending_ == 0) pending_ = lengths_->next();
  const Tokens piece = std::min(pending_, max);
  pending_ -= piece;
  return piece;
}

std::vector<MaskSpec> MicrobatchSource::dynamic_masks(const Document& doc) {
  static std::mutex mutex;
  static std::map<std::tuple<std::uint64_t, std::int64_t, Tokens, double, Tokens, int, int, int>, std::vector<MaskSpec>>
      cache;
  const auto key = std::tuple(seed_, doc.id, doc.length, dynamic_->gamma, dynamic_->block, shape_.q_heads,
                              shape_.kv_heads, shape_.head_dim);
  {
    const std::lock_guard lock(mutex);
    if (const auto it = cache.find(key); it != cache.end()) return it->second;
  }
  std::vector<MaskSpec> masks;
  for (const auto& index : sparse::synthetic_head_indices(seed_, doc.id, shape_, doc.length, *dynamic_)) {
    masks.push_back(sparse::to_mask(index));
  }
  const std::lock_guard lock(mutex);
  return cache.emplace(key, std::move(masks)).first->second;
}

}  // namespace fulcrum::sim
