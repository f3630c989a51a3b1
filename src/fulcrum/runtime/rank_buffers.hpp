// The memory of one rank's Program: every declared buffer, allocated and initialised as the Program
// says (zero, -inf, or zero-filled for inputs and undefined rows, so a bug reads zeros, not garbage).
//
// A slice over some heads (Slice::heads) is a contiguous part of each of its rows, so it is `rows`
// strided runs; `gather` and `scatter` copy it into and out of one contiguous block (a message's bytes,
// or a dense tensor for a merge). Whole-row slices are one block and are used in place.
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

  /// The first row of a slice (all its heads).
  std::byte* row(const Slice& slice);
  /// Bytes a slice covers: rows x its heads x values per head x element bytes.
  std::size_t bytes(const Slice& slice) const;
  std::size_t row_bytes(int buffer) const;
  Tokens rows(int buffer) const { return program_->buffers[buffer].rows; }

  /// A slice as one run of `run_bytes` per row, rows `stride` bytes apart from `first`.
  struct Runs {
    std::byte* first = nullptr;
    std::size_t run_bytes = 0;
    std::size_t stride = 0;
    Tokens rows = 0;
    bool contiguous() const { return run_bytes == stride || rows <= 1; }
    std::byte* at(Tokens i) const { return first + static_cast<std::size_t>(i) * stride; }
  };
  Runs runs(const Slice& slice);
  /// Copies the slice's bytes to `out` (bytes(slice) of them), row after row; scatter is the reverse.
  void gather(const Slice& slice, std::byte* out);
  void scatter(const Slice& slice, const std::byte* in);

  /// A token-major view of a buffer (or of whole rows of it) as `heads` x `dim` of T.
  template <class T>
  kernels::HeadTensor<T> view(int buffer) {
    return view<T>(Slice{buffer, 0, rows(buffer)});
  }
  template <class T>
  kernels::HeadTensor<T> view(const Slice& s) {
    const Buffer& b = program_->buffers[s.buffer];
    check_whole_rows(s);
    return {reinterpret_cast<T*>(row(s)), s.rows, heads_.heads_of(b.field), heads_.head_values(b.field)};
  }
  /// A slice as a contiguous [rows][its heads][dim] tensor: the buffer itself for whole rows, else the
  /// slice gathered into `scratch` (an output must then be scattered back from `scratch` afterwards).
  template <class T>
  kernels::HeadTensor<T> dense_view(const Slice& s, std::vector<std::byte>& scratch) {
    const Buffer& b = program_->buffers[s.buffer];
    const int heads = s.heads.count(heads_.heads_of(b.field));
    if (heads == heads_.heads_of(b.field)) return view<T>(s);
    scratch.resize(bytes(s));
    gather(s, scratch.data());
    return {reinterpret_cast<T*>(scratch.data()), s.rows, heads, heads_.head_values(b.field)};
  }

  int rank() const { return program_->rank; }
  /// Copies buffer `name` of `other` (same rows and field) into this one's buffer of that name: how the
  /// forward's O and LSE become the backward's inputs.
  void copy_from(RankBuffers& other, std::string_view name);
  /// The buffer called `name` (it must exist).
  int index(std::string_view name) const;

 private:
  void check_whole_rows(const Slice& s) const;

  const Program* program_;
  HeadLayout heads_;
  std::vector<std::vector<float>> storage_;  // float-backed: 4-byte aligned for fp32 and bf16 alike
};

}  // namespace fulcrum::runtime
