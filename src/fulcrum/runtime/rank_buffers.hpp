// The memory of one rank's Program: every declared buffer, allocated and initialised as the Program
// says (zero, -inf, or zero-filled for inputs and undefined rows, so a bug reads zeros, not garbage).
#pragma once

#include "fulcrum/kernels/tensor.hpp"
#include "fulcrum/plan/program.hpp"

#include <cstddef>
#include <span>
#include <vector>

namespace fulcrum::runtime {

class RankBuffers {
 public:
  RankBuffers(const Program& program, const HeadLayout& heads);

  std::byte* row(const Slice& slice);
  std::size_t bytes(const Slice& slice) const { return static_cast<std::size_t>(slice.rows) * row_bytes(slice.buffer); }
  std::size_t row_bytes(int buffer) const;
  Tokens rows(int buffer) const { return program_->buffers[buffer].rows; }

  /// A token-major view of a buffer (or of a slice of it) as `heads` x `dim` of T.
  template <class T>
  kernels::HeadTensor<T> view(int buffer) {
    return view<T>(Slice{buffer, 0, rows(buffer)});
  }
  template <class T>
  kernels::HeadTensor<T> view(const Slice& s) {
    const Buffer& b = program_->buffers[s.buffer];
    const int h = b.field == Field::kLse ? heads_.q_heads : heads_of(b.field);
    const int d = b.field == Field::kLse ? 1 : heads_.head_dim;
    return {reinterpret_cast<T*>(row(s)), s.rows, h, d};
  }

  int rank() const { return program_->rank; }
  /// Copies buffer `name` of `other` (same rows and field) into this one's buffer of that name: how the
  /// forward's O and LSE become the backward's inputs.
  void copy_from(RankBuffers& other, std::string_view name);
  /// The buffer called `name` (it must exist).
  int index(std::string_view name) const;

 private:
  int heads_of(Field field) const;

  const Program* program_;
  HeadLayout heads_;
  std::vector<std::vector<float>> storage_;  // float-backed: 4-byte aligned for fp32 and bf16 alike
};

}  // namespace fulcrum::runtime
