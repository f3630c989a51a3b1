#include "fulcrum/runtime/rank_buffers.hpp"

#include "fulcrum/core/error.hpp"

#include <cstring>
#include <limits>

namespace fulcrum::runtime {

RankBuffers::RankBuffers(const Program& program, const HeadLayout& heads) : program_(&program), heads_(heads) {
  storage_.reserve(program.buffers.size());
  for (std::size_t i = 0; i < program.buffers.size(); ++i) {
    const Buffer& b = program.buffers[i];
    const auto total = static_cast<std::size_t>(b.rows) * row_bytes(static_cast<int>(i));
    storage_.emplace_back((total + sizeof(float) - 1) / sizeof(float), 0.0f);
    // Only LSE is ever -inf-initialised, and it is fp32.
    if (b.init == BufferInit::kNegInf) {
      FULCRUM_CHECK(b.field == Field::kLse, "buffer '{}': -inf init is for LSE only", b.name);
      std::fill(storage_.back().begin(), storage_.back().end(), -std::numeric_limits<float>::infinity());
    }
  }
}

std::size_t RankBuffers::row_bytes(int buffer) const {
  return static_cast<std::size_t>(heads_.row_bytes(program_->buffers[buffer].field));
}

std::size_t RankBuffers::bytes(const Slice& slice) const {
  return static_cast<std::size_t>(heads_.bytes(program_->buffers[slice.buffer].field, slice));
}

void RankBuffers::check_whole_rows(const Slice& s) const {
  const Buffer& b = program_->buffers[s.buffer];
  FULCRUM_CHECK(s.heads.count(heads_.heads_of(b.field)) == heads_.heads_of(b.field),
                "a view of '{}' covers whole rows, not heads [{}, {})", b.name, s.heads.begin, s.heads.end);
}

RankBuffers::Runs RankBuffers::runs(const Slice& s) {
  const Field field = program_->buffers[s.buffer].field;
  const auto head_bytes =
      static_cast<std::size_t>(heads_.head_values(field)) * static_cast<std::size_t>(heads_.element_bytes(field));
  FULCRUM_CHECK(
      s.heads.all() || (s.heads.begin >= 0 && s.heads.begin < s.heads.end && s.heads.end <= heads_.heads_of(field)),
      "slice of buffer {}: heads [{}, {}) of {}", s.buffer, s.heads.begin, s.heads.end, heads_.heads_of(field));
  return {row(s) + static_cast<std::size_t>(s.heads.first()) * head_bytes,
          static_cast<std::size_t>(heads_.row_bytes(field, s.heads)), row_bytes(s.buffer), s.rows};
}

void RankBuffers::gather(const Slice& slice, std::byte* out) {
  const Runs r = runs(slice);
  if (r.contiguous()) {
    if (r.rows > 0) std::memcpy(out, r.first, r.run_bytes * static_cast<std::size_t>(r.rows));
    return;
  }
  for (Tokens i = 0; i < r.rows; ++i)
    std::memcpy(out + static_cast<std::size_t>(i) * r.run_bytes, r.at(i), r.run_bytes);
}

void RankBuffers::scatter(const Slice& slice, const std::byte* in) {
  const Runs r = runs(slice);
  if (r.contiguous()) {
    if (r.rows > 0) std::memcpy(r.first, in, r.run_bytes * static_cast<std::size_t>(r.rows));
    return;
  }
  for (Tokens i = 0; i < r.rows; ++i) std::memcpy(r.at(i), in + static_cast<std::size_t>(i) * r.run_bytes, r.run_bytes);
}

std::byte* RankBuffers::row(const Slice& s) {
  FULCRUM_CHECK(
      s.buffer >= 0 && s.buffer < static_cast<int>(storage_.size()) && s.row >= 0 && s.row + s.rows <= rows(s.buffer),
      "slice [{}, +{}) of buffer {} is out of range", s.row, s.rows, s.buffer);
  return reinterpret_cast<std::byte*>(storage_[s.buffer].data()) +
         static_cast<std::size_t>(s.row) * row_bytes(s.buffer);
}

void RankBuffers::copy_from(RankBuffers& other, std::string_view name) {
  const Slice from{other.index(name), 0, 0}, to{index(name), 0, 0};
  const Slice src{from.buffer, 0, other.rows(from.buffer)}, dst{to.buffer, 0, rows(to.buffer)};
  FULCRUM_CHECK(other.bytes(src) == bytes(dst), "buffer '{}': {} bytes cannot replace {}", name, other.bytes(src),
                bytes(dst));
  if (bytes(dst) > 0) std::memcpy(row(dst), other.row(src), bytes(dst));  // an empty buffer has no storage
}

int RankBuffers::index(std::string_view name) const {
  const int i = program_->find_buffer(name);
  FULCRUM_CHECK(i >= 0, "rank {}: the program has no buffer '{}'", program_->rank, name);
  return i;
}

}  // namespace fulcrum::runtime
