// Views of token-major attention tensors: [rows][heads][dim], contiguous, as packed variable-length
// batches are laid out (and as PyTorch's [tokens, heads, head_dim] is). A token range is one slice,
// so the runtime can send or receive it without gathering.
#pragma once

#include "fulcrum/core/interval.hpp"

#include <cstddef>
#include <string_view>

namespace fulcrum::kernels {

template <class T>
struct HeadTensor {
  T* data = nullptr;
  Tokens rows = 0;
  int heads = 0;
  int dim = 0;

  std::ptrdiff_t row_stride() const { return static_cast<std::ptrdiff_t>(heads) * dim; }
  T* at(Tokens row, int head) const { return data + row * row_stride() + static_cast<std::ptrdiff_t>(head) * dim; }
  std::size_t size() const { return static_cast<std::size_t>(rows) * heads * dim; }
  operator HeadTensor<const T>() const { return {data, rows, heads, dim}; }  // NOLINT: view widening
};

void check_dims(std::string_view name, bool has_data, Tokens rows, int heads, int dim, Tokens want_rows, int want_heads,
                int want_dim);

/// Throws fulcrum::Error naming `name` unless the view is [rows][heads][dim] (with data when non-empty).
template <class T>
void check_shape(std::string_view name, const HeadTensor<T>& t, Tokens rows, int heads, int dim) {
  check_dims(name, t.data != nullptr, t.rows, t.heads, t.dim, rows, heads, dim);
}

}  // namespace fulcrum::kernels
