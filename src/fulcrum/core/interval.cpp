#include "fulcrum/core/interval.hpp"

#include "fulcrum/core/error.hpp"

namespace fulcrum {

void SmallRanges::push(Range r) {
  if (r.empty()) return;
  FULCRUM_CHECK(size_ < kCapacity, "SmallRanges holds at most {} ranges", kCapacity);
  items_[size_++] = r;
}

void SmallRanges::normalize() {
  std::sort(items_, items_ + size_, [](Range a, Range b) { return a.begin < b.begin; });
  int out = 0;
  for (int i = 0; i < size_; ++i) {
    if (out > 0 && items_[i].begin <= items_[out - 1].end) {
      items_[out - 1].end = std::max(items_[out - 1].end, items_[i].end);
    } else {
      items_[out++] = items_[i];
    }
  }
  size_ = out;
}

Tokens SmallRanges::total() const {
  Tokens n = 0;
  for (const auto& r : *this) n += r.size();
  return n;
}

Tokens RangeSet::count_missing(Range r) const {
  if (r.empty()) return 0;
  Tokens covered = 0;
  auto it =
      std::lower_bound(ranges_.begin(), ranges_.end(), r.begin, [](const Range& x, Tokens t) { return x.end <= t; });
  for (; it != ranges_.end() && it->begin < r.end; ++it) covered += intersect(*it, r).size();
  return r.size() - covered;
}

void RangeSet::add(Range r) {
  if (r.empty()) return;
  // Find the first range that ends at or after r.begin; merge everything overlapping or adjacent.
  auto first =
      std::lower_bound(ranges_.begin(), ranges_.end(), r.begin, [](const Range& x, Tokens t) { return x.end < t; });
  auto last = first;
  while (last != ranges_.end() && last->begin <= r.end) {
    r.begin = std::min(r.begin, last->begin);
    r.end = std::max(r.end, last->end);
    ++last;
  }
  first = ranges_.erase(first, last);
  ranges_.insert(first, r);
}

std::vector<Range> RangeSet::missing(Range r) const {
  std::vector<Range> out;
  if (r.empty()) return out;
  Tokens cursor = r.begin;
  auto it =
      std::lower_bound(ranges_.begin(), ranges_.end(), r.begin, [](const Range& x, Tokens t) { return x.end <= t; });
  for (; it != ranges_.end() && it->begin < r.end; ++it) {
    if (it->begin > cursor) out.push_back({cursor, it->begin});
    cursor = std::max(cursor, it->end);
  }
  if (cursor < r.end) out.push_back({cursor, r.end});
  return out;
}

Tokens RangeSet::size() const {
  Tokens total = 0;
  for (const auto& r : ranges_) total += r.size();
  return total;
}

}  // namespace fulcrum
