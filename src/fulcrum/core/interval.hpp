// Half-open token ranges [begin, end) and small sets of them: the coordinates every module shares.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <vector>

namespace fulcrum {

using Tokens = std::int64_t;

struct Range {
  Tokens begin = 0;
  Tokens end = 0;

  Tokens size() const { return end > begin ? end - begin : 0; }
  bool empty() const { return end <= begin; }
  bool contains(Tokens t) const { return t >= begin && t < end; }
  friend bool operator==(const Range&, const Range&) = default;
};

inline Range intersect(Range a, Range b) { return {std::max(a.begin, b.begin), std::min(a.end, b.end)}; }

/// Buffer rows [row, row + count) hold the tokens at document positions [position, position + count):
/// how the Plan IR and the kernels name a stretch of one document's tokens inside a buffer.
struct RowSpan {
  Tokens row = 0;
  Tokens position = 0;
  Tokens count = 0;
  friend bool operator==(const RowSpan&, const RowSpan&) = default;
};

/// Q heads [begin, end) of a task. The default, end < 0, means every head, so that all-head tasks
/// need no head count and serialise as before; an explicit range is checked against the model's.
struct HeadRange {
  int begin = 0;
  int end = -1;

  bool all() const { return end < 0; }
  int first() const { return all() ? 0 : begin; }
  /// One past the last head, with "all" resolved to `q_heads`.
  int last(int q_heads) const { return all() ? q_heads : end; }
  int count(int q_heads) const { return last(q_heads) - first(); }
  bool contains(int head, int q_heads) const { return head >= first() && head < last(q_heads); }
  /// The same heads of `heads`, spelt "all" when they are every one of them: one spelling per set, so
  /// that work over [0, heads) moves and serialises exactly as all-head work.
  HeadRange normalized(int heads) const { return first() == 0 && last(heads) == heads ? HeadRange{} : *this; }
  friend bool operator==(const HeadRange&, const HeadRange&) = default;
};

/// The kv heads that q heads `q` read under GQA, where q head h reads kv head h / (q_heads / kv_heads):
/// every group one of them is in, normalised (all when that is every kv head).
HeadRange kv_heads_read(HeadRange q, int q_heads, int kv_heads);

/// A few sorted, disjoint ranges in place (no heap): what a mask answers for one row, or the keys a
/// block of rows needs. Capacity 4; empty ranges are dropped.
class SmallRanges {
 public:
  static constexpr int kCapacity = 4;
  SmallRanges() = default;
  SmallRanges(std::initializer_list<Range> ranges) {
    for (const auto& r : ranges) push(r);
  }
  /// Appends r (callers keep ranges sorted and disjoint, or call normalize()).
  void push(Range r);
  /// Sorts and merges overlapping or adjacent ranges.
  void normalize();
  const Range* begin() const { return items_; }
  const Range* end() const { return items_ + size_; }
  int size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const Range& operator[](int i) const { return items_[i]; }
  const Range& back() const { return items_[size_ - 1]; }
  Tokens total() const;
  std::vector<Range> to_vector() const { return {begin(), end()}; }
  friend bool operator==(const SmallRanges& a, const SmallRanges& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  Range items_[kCapacity]{};
  int size_ = 0;
};

/// A set of tokens kept as sorted, disjoint, non-adjacent ranges.
class RangeSet {
 public:
  void add(Range r);
  /// Tokens of r that are not in this set.
  std::vector<Range> missing(Range r) const;
  /// How many tokens of r are not in this set (no allocation).
  Tokens count_missing(Range r) const;
  Tokens size() const;
  bool covers(Range r) const { return missing(r).empty(); }
  const std::vector<Range>& ranges() const { return ranges_; }

 private:
  std::vector<Range> ranges_;
};

/// Tokens held per head: one RangeSet for each of `heads` heads. It answers what a server still lacks
/// of a document's K/V when tasks over different head ranges read the same keys, as pieces of
/// consecutive heads, so that what is fetched once for one head range is not fetched again for another.
class PerHeadRangeSet {
 public:
  explicit PerHeadRangeSet(int heads = 1) : sets_(static_cast<std::size_t>(heads)) {}

  /// `tokens` of heads [head_begin, head_end).
  struct Piece {
    Range tokens;
    int head_begin = 0;
    int head_end = 0;
    friend bool operator==(const Piece&, const Piece&) = default;
  };
  /// The part of `tokens` x heads [head_begin, head_end) not held yet, in token order, as pieces that are
  /// each as long as their run of heads allows (so with one head, or with every head holding the same
  /// tokens, they are RangeSet::missing's gaps); then holds all of it.
  std::vector<Piece> add_missing(Range tokens, int head_begin, int head_end);
  int heads() const { return static_cast<int>(sets_.size()); }

 private:
  std::vector<RangeSet> sets_;
};

inline Tokens ceil_div(Tokens a, Tokens b) { return (a + b - 1) / b; }
inline Tokens round_up(Tokens a, Tokens multiple) { return ceil_div(a, multiple) * multiple; }

}  // namespace fulcrum
