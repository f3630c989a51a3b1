#include "fulcrum/kernels/non_finite.hpp"

#include "fulcrum/kernels/bf16.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace fulcrum::kernels {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// The rows of each head a call reads, as sorted disjoint ranges: every cell is scanned once however many
// tasks read it.
using HeadRows = std::vector<std::vector<Range>>;

void merge_ranges(std::vector<Range>& ranges) {
  std::sort(ranges.begin(), ranges.end(), [](Range a, Range b) { return a.begin < b.begin; });
  std::vector<Range> merged;
  for (const Range r : ranges) {
    if (!merged.empty() && r.begin <= merged.back().end) {
      merged.back().end = std::max(merged.back().end, r.end);
    } else {
      merged.push_back(r);
    }
  }
  ranges = std::move(merged);
}

// Query rows per q head, or (by_kv) key rows per kv head.
HeadRows rows_read(std::span<const AttentionTask> tasks, const AttentionShape& shape, bool by_kv) {
  const int group = shape.q_heads / shape.kv_heads;
  HeadRows out(static_cast<std::size_t>(by_kv ? shape.kv_heads : shape.q_heads));
  for (const auto& t : tasks) {
    const int h0 = t.heads.first(), h1 = t.heads.last(shape.q_heads);
    if (h0 >= h1) continue;
    if (by_kv) {
      if (t.keys.count == 0) continue;
      for (int g = h0 / group; g <= (h1 - 1) / group; ++g) {
        out[static_cast<std::size_t>(g)].push_back({t.keys.row, t.keys.row + t.keys.count});
      }
    } else {
      for (const auto& span : t.queries) {
        if (span.count == 0) continue;
        for (int h = h0; h < h1; ++h) out[static_cast<std::size_t>(h)].push_back({span.row, span.row + span.count});
      }
    }
  }
  for (auto& ranges : out) merge_ranges(ranges);
  return out;
}

// Whether none of x[0, n) is NaN or infinite: an exponent of all ones. An or-reduction of integer tests,
// which the compiler vectorises (a float sum of x * 0 would run one dependent add per value).
bool all_finite(const float* x, int n) {
  std::uint32_t bad = 0;
  for (int c = 0; c < n; ++c) {
    const auto u = std::bit_cast<std::uint32_t>(x[c]);
    bad |= static_cast<std::uint32_t>((u & 0x7f800000u) == 0x7f800000u);
  }
  return bad == 0;
}
bool all_finite(const BFloat16* x, int n) {
  std::uint32_t bad = 0;
  for (int c = 0; c < n; ++c) bad |= static_cast<std::uint32_t>((x[c].bits & 0x7f80u) == 0x7f80u);
  return bad == 0;
}

// Per (row, head) cell of `t`, whether one of its values is NaN or infinite (`lse`: NaN or +inf), over
// the rows `read`; the flags are or-ed into `bad` (rows x heads). Returns whether any was.
template <class T>
bool flag_non_finite(HeadTensor<const T> t, const HeadRows& read, bool lse, std::vector<std::uint8_t>& bad) {
  bad.resize(static_cast<std::size_t>(t.rows) * static_cast<std::size_t>(t.heads), 0);
  const auto heads = static_cast<std::ptrdiff_t>(read.size());
  int any = 0;
#pragma omp parallel for schedule(dynamic, 1) reduction(| : any)
  for (std::ptrdiff_t h = 0; h < heads; ++h) {
    for (const Range r : read[static_cast<std::size_t>(h)]) {
      for (Tokens row = r.begin; row < r.end; ++row) {
        const T* x = t.at(row, static_cast<int>(h));
        bool finite = true;
        if (lse) {
          const float l = to_float(x[0]);
          finite = !std::isnan(l) && l != std::numeric_limits<float>::infinity();
        } else {
          finite = all_finite(x, t.dim);
        }
        if (!finite) {
          bad[static_cast<std::size_t>(row * t.heads + h)] = 1;
          any = 1;
        }
      }
    }
  }
  return any != 0;
}

// One task and q head: its keys as 64-key chunks of bits (bit b of chunk c: key keys.row + 64 c + b).
struct KeyChunks {
  Tokens count = 0;
  std::vector<std::uint64_t> bits;
  explicit KeyChunks(Tokens keys) : count(keys), bits(static_cast<std::size_t>((keys + 63) / 64), 0) {}
  int width(std::size_t c) const { return static_cast<int>(std::min<Tokens>(64, count - static_cast<Tokens>(c) * 64)); }
  bool full(std::size_t c) const {
    return bits[c] == (width(c) == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << width(c)) - 1);
  }
  bool test(Tokens j) const { return (bits[static_cast<std::size_t>(j / 64)] >> (j % 64) & 1) != 0; }
};

// The keys of chunk c that the task's row at position `pos` sees.
std::uint64_t seen(const AttentionTask& t, int h, Tokens pos, const KeyChunks& keys, std::size_t c) {
  return t.mask_of(h).row_bits(pos, t.keys.position + static_cast<Tokens>(c) * 64, keys.width(c), t.doc_len);
}

bool sees_a_key(const AttentionTask& t, int h, Tokens pos, const KeyChunks& keys) {
  for (std::size_t c = 0; c < keys.bits.size(); ++c) {
    if (seen(t, h, pos, keys, c) != 0) return true;
  }
  return false;
}

std::uint8_t flag(const std::vector<std::uint8_t>& flags, Tokens row, int heads, int h) {
  return flags[static_cast<std::size_t>(row * heads + h)];
}

template <class T>
void fill_nan(T* x, int dim) {
  std::fill(x, x + dim, from_float<T>(kNaN));
}

// Sets to NaN the outputs that read a flagged cell (the rules in the header): per task and q head,
// `row_out(row, h)` for a poisoned query row and, with `key_out`, `key_out(key row, kv head)` for a
// poisoned key. A key the task sees through several of its heads is reported once per head.
template <class RowOut, class KeyOut>
void poison(std::span<const AttentionTask> tasks, const AttentionShape& shape,
            const std::vector<std::uint8_t>& bad_rows, const std::vector<std::uint8_t>& bad_keys, bool backward,
            RowOut row_out, KeyOut key_out) {
  const int group = shape.q_heads / shape.kv_heads;
  for (const auto& t : tasks) {
    for (int h = t.heads.first(); h < t.heads.last(shape.q_heads); ++h) {
      const int g = h / group;
      KeyChunks marked(t.keys.count), seen_marked(t.keys.count), seen_by_bad(t.keys.count);
      for (Tokens j = 0; j < t.keys.count; ++j) {
        if (flag(bad_keys, t.keys.row + j, shape.kv_heads, g) != 0) {
          marked.bits[static_cast<std::size_t>(j / 64)] |= std::uint64_t{1} << (j % 64);
        }
      }
      for (const auto& span : t.queries) {
        for (Tokens i = 0; i < span.count; ++i) {
          const Tokens row = span.row + i, pos = span.position + i;
          bool sees_marked = false;
          for (std::size_t c = 0; c < marked.bits.size(); ++c) {
            if (marked.bits[c] == 0) continue;
            const std::uint64_t s = seen(t, h, pos, marked, c) & marked.bits[c];
            seen_marked.bits[c] |= s;
            sees_marked |= s != 0;
          }
          const bool row_bad = flag(bad_rows, row, shape.q_heads, h) != 0 && sees_a_key(t, h, pos, marked);
          if (row_bad || sees_marked) row_out(row, h);
          if (!backward || !row_bad) continue;
          for (std::size_t c = 0; c < seen_by_bad.bits.size(); ++c) {
            if (!seen_by_bad.full(c)) seen_by_bad.bits[c] |= seen(t, h, pos, seen_by_bad, c);
          }
        }
      }
      if (!backward) continue;
      for (Tokens j = 0; j < t.keys.count; ++j) {
        if (seen_marked.test(j) || seen_by_bad.test(j)) key_out(t.keys.row + j, g);
      }
    }
  }
}

// A copy of `t` with its non-finite values zeroed (`lse`: NaN and +inf), viewed with t's shape.
template <class T>
struct FiniteCopy {
  std::vector<T> values;
  HeadTensor<const T> view;
  FiniteCopy(HeadTensor<const T> t, bool lse)
      : values(t.data, t.data + t.size()), view{values.data(), t.rows, t.heads, t.dim} {
    for (T& x : values) {
      const float f = to_float(x);
      if (lse ? (std::isnan(f) || f == std::numeric_limits<float>::infinity()) : !std::isfinite(f))
        x = from_float<T>(0);
    }
  }
};

}  // namespace

template <class T>
bool forward_with_non_finite(std::span<const AttentionTask> tasks, const AttentionShape& shape, HeadTensor<const T> q,
                             HeadTensor<const T> k, HeadTensor<const T> v, HeadTensor<T> o, HeadTensor<float> lse,
                             const ForwardKernel<T>& kernel) {
  std::vector<std::uint8_t> bad_rows, bad_keys;
  const HeadRows key_rows = rows_read(tasks, shape, true);
  bool any = flag_non_finite(q, rows_read(tasks, shape, false), false, bad_rows);
  any |= flag_non_finite(k, key_rows, false, bad_keys);
  any |= flag_non_finite(v, key_rows, false, bad_keys);
  if (!any) return false;
  kernel(FiniteCopy<T>(q, false).view, FiniteCopy<T>(k, false).view, FiniteCopy<T>(v, false).view);
  poison(
      tasks, shape, bad_rows, bad_keys, false,
      [&](Tokens row, int h) {
        fill_nan(o.at(row, h), o.dim);
        *lse.at(row, h) = kNaN;
      },
      [](Tokens, int) {});
  return true;
}

template <class T>
bool backward_with_non_finite(std::span<const AttentionTask> tasks, const AttentionShape& shape, HeadTensor<const T> q,
                              HeadTensor<const T> k, HeadTensor<const T> v, HeadTensor<const T> o,
                              HeadTensor<const T> d_o, HeadTensor<const float> lse, HeadTensor<float> dq,
                              HeadTensor<float> dk, HeadTensor<float> dv, const BackwardKernel<T>& kernel) {
  std::vector<std::uint8_t> bad_rows, bad_keys;
  const HeadRows query_rows = rows_read(tasks, shape, false), key_rows = rows_read(tasks, shape, true);
  bool any = flag_non_finite(q, query_rows, false, bad_rows);
  any |= flag_non_finite(o, query_rows, false, bad_rows);
  any |= flag_non_finite(d_o, query_rows, false, bad_rows);
  any |= flag_non_finite(lse, query_rows, true, bad_rows);
  any |= flag_non_finite(k, key_rows, false, bad_keys);
  any |= flag_non_finite(v, key_rows, false, bad_keys);
  if (!any) return false;
  kernel(FiniteCopy<T>(q, false).view, FiniteCopy<T>(k, false).view, FiniteCopy<T>(v, false).view,
         FiniteCopy<T>(o, false).view, FiniteCopy<T>(d_o, false).view, FiniteCopy<float>(lse, true).view);
  poison(
      tasks, shape, bad_rows, bad_keys, true, [&](Tokens row, int h) { fill_nan(dq.at(row, h), dq.dim); },
      [&](Tokens row, int g) {
        fill_nan(dk.at(row, g), dk.dim);
        fill_nan(dv.at(row, g), dv.dim);
      });
  return true;
}

template bool forward_with_non_finite<float>(std::span<const AttentionTask>, const AttentionShape&,
                                             HeadTensor<const float>, HeadTensor<const float>, HeadTensor<const float>,
                                             HeadTensor<float>, HeadTensor<float>, const ForwardKernel<float>&);
template bool forward_with_non_finite<BFloat16>(std::span<const AttentionTask>, const AttentionShape&,
                                                HeadTensor<const BFloat16>, HeadTensor<const BFloat16>,
                                                HeadTensor<const BFloat16>, HeadTensor<BFloat16>, HeadTensor<float>,
                                                const ForwardKernel<BFloat16>&);
template bool backward_with_non_finite<float>(std::span<const AttentionTask>, const AttentionShape&,
                                              HeadTensor<const float>, HeadTensor<const float>, HeadTensor<const float>,
                                              HeadTensor<const float>, HeadTensor<const float>, HeadTensor<const float>,
                                              HeadTensor<float>, HeadTensor<float>, HeadTensor<float>,
                                              const BackwardKernel<float>&);
template bool backward_with_non_finite<BFloat16>(std::span<const AttentionTask>, const AttentionShape&,
                                                 HeadTensor<const BFloat16>, HeadTensor<const BFloat16>,
                                                 HeadTensor<const BFloat16>, HeadTensor<const BFloat16>,
                                                 HeadTensor<const BFloat16>, HeadTensor<const float>, HeadTensor<float>,
                                                 HeadTensor<float>, HeadTensor<float>, const BackwardKernel<BFloat16>&);

}  // namespace fulcrum::kernels
