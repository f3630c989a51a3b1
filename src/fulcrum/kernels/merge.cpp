#include "fulcrum/kernels/merge.hpp"

#include "fulcrum/core/error.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace fulcrum::kernels {

template <class T>
void merge_partials(std::span<const PartialResult<T>> parts, HeadTensor<T> o, HeadTensor<float> lse) {
  if (parts.empty()) fail("parts: merge needs at least one partial result");
  check_shape("lse", lse, o.rows, o.heads, 1);
  for (std::size_t i = 0; i < parts.size(); ++i) {
    check_shape(fmt::format("parts[{}].o", i), parts[i].o, o.rows, o.heads, o.dim);
    check_shape(fmt::format("parts[{}].lse", i), parts[i].lse, o.rows, o.heads, 1);
  }
  const auto cells = static_cast<std::ptrdiff_t>(o.rows) * o.heads;
#pragma omp parallel
  {
    std::vector<float> row(static_cast<std::size_t>(o.dim));
#pragma omp for schedule(static)
    for (std::ptrdiff_t cell = 0; cell < cells; ++cell) {
      const Tokens r = cell / o.heads;
      const int h = static_cast<int>(cell % o.heads);
      float top = -INFINITY;
      // A NaN LSE (a part whose inputs were not finite, non_finite.hpp) makes the merged row NaN.
      for (const auto& p : parts) {
        const float l = *p.lse.at(r, h);
        if (std::isnan(l) || l > top) top = l;
      }
      std::fill(row.begin(), row.end(), 0.0f);
      if (std::isinf(top) && top < 0) {
        *lse.at(r, h) = top;
      } else {
        double sum = 0;
        for (const auto& p : parts) sum += std::exp(static_cast<double>(*p.lse.at(r, h)) - top);
        const float merged = top + static_cast<float>(std::log(sum));
        for (const auto& p : parts) {
          const float w = std::exp(*p.lse.at(r, h) - merged);
          const T* src = p.o.at(r, h);
          for (int c = 0; c < o.dim; ++c) row[static_cast<std::size_t>(c)] += w * to_float(src[c]);
        }
        *lse.at(r, h) = merged;
      }
      T* out = o.at(r, h);
      for (int c = 0; c < o.dim; ++c) out[c] = from_float<T>(row[static_cast<std::size_t>(c)]);
    }
  }
}

template void merge_partials<float>(std::span<const PartialResult<float>>, HeadTensor<float>, HeadTensor<float>);
template void merge_partials<BFloat16>(std::span<const PartialResult<BFloat16>>, HeadTensor<BFloat16>,
                                       HeadTensor<float>);

}  // namespace fulcrum::kernels
