#include "fulcrum/workload/batch.hpp"

#include "fulcrum/core/error.hpp"

#include <algorithm>

namespace fulcrum {
namespace {

struct SegmentDocOrder {
  bool operator()(const Segment& s, int d) const { return s.doc < d; }
  bool operator()(int d, const Segment& s) const { return d < s.doc; }
};

}  // namespace

Tokens Batch::total_tokens() const {
  Tokens total = 0;
  for (const auto& d : documents) total += d.length;
  return total;
}

std::span<const Segment> Batch::segments_of(int doc) const {
  const auto [first, last] = std::equal_range(segments.begin(), segments.end(), doc, SegmentDocOrder{});
  return {first, last};
}

void validate_batch_shape(int ranks, Tokens tokens_per_rank) {
  if (ranks < 1) fail("ranks = {}: must be >= 1", ranks);
  if (tokens_per_rank < 1) fail("tokens-per-rank = {}: must be >= 1", tokens_per_rank);
}

Batch pack_batch(const std::vector<Document>& documents, int ranks, Tokens tokens_per_rank) {
  validate_batch_shape(ranks, tokens_per_rank);
  Batch batch;
  batch.ranks = ranks;
  batch.tokens_per_rank = tokens_per_rank;
  const Tokens capacity = static_cast<Tokens>(ranks) * tokens_per_rank;
  Tokens placed = 0;
  for (const auto& source : documents) {
    if (source.length < 1) fail("document {} length = {}: must be >= 1", source.id, source.length);
    if (placed == capacity) break;
    Document doc = source;
    doc.length = std::min(doc.length, capacity - placed);
    const int index = static_cast<int>(batch.documents.size());
    batch.documents.push_back(doc);
    // Split the document at every rank boundary it crosses.
    for (Tokens offset = 0; offset < doc.length;) {
      const Tokens global = placed + offset;
      const int rank = static_cast<int>(global / tokens_per_rank);
      const Tokens room = (rank + 1) * tokens_per_rank - global;
      const Tokens take = std::min(room, doc.length - offset);
      batch.segments.push_back({index, {offset, offset + take}, rank});
      offset += take;
    }
    placed += doc.length;
  }
  return batch;
}

BatchStream::BatchStream(LengthFn next_length, int ranks, Tokens tokens_per_rank, MaskSpec mask)
    : next_length_(std::move(next_length)), ranks_(ranks), tokens_per_rank_(tokens_per_rank), mask_(std::move(mask)) {
  validate_batch_shape(ranks, tokens_per_rank);
}

Batch BatchStream::next() {
  const Tokens capacity = static_cast<Tokens>(ranks_) * tokens_per_rank_;
  std::vector<Document> docs;
  Tokens total = 0;
  auto push = [&](Tokens length) {
    docs.push_back({next_id_++, length, mask_});
    total += length;
  };
  if (carried_tokens_ > 0) push(carried_tokens_);
  while (total < capacity) {
    const Tokens length = next_length_();
    FULCRUM_CHECK(length >= 1, "length source produced {}", length);
    push(length);
  }
  carried_tokens_ = total - capacity;  // the cut-off part of the last document starts the next batch
  return pack_batch(docs, ranks_, tokens_per_rank_);
}

}  // namespace fulcrum
