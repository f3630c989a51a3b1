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

HeadRange kv_heads_read(HeadRange q, int q_heads, int kv_heads) {
  FULCRUM_CHECK(kv_heads > 0 && q_heads % kv_heads == 0, "{} q heads do not form groups over {} kv heads", q_heads,
                kv_heads);
  if (q.all()) return {};
  const int group = q_heads / kv_heads;
  return HeadRange{q.first() / group, (q.last(q_heads) - 1) / group + 1}.normalized(kv_heads);
}

std::vector<PerHeadRangeSet::Piece> PerHeadRangeSet::add_missing(Range tokens, int head_begin, int head_end) {
  FULCRUM_CHECK(0 <= head_begin && head_begin <= head_end && head_end <= heads(), "heads [{}, {}) of {}", head_begin,
                head_end, heads());
  std::vector<Piece> out;
  if (tokens.empty()) return out;
  // Cut `tokens` wherever some head's held set starts or ends: within a stretch every head holds all of
  // it or none.
  std::vector<Tokens> cuts = {tokens.begin, tokens.end};
  for (int h = head_begin; h < head_end; ++h) {
    for (const auto& r : sets_[h].ranges()) {
      for (Tokens edge : {r.begin, r.end}) {
        if (edge > tokens.begin && edge < tokens.end) cuts.push_back(edge);
      }
    }
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  std::vector<std::size_t> open, next;  // pieces that reach the current stretch's start
  for (std::size_t c = 0; c + 1 < cuts.size(); ++c) {
    const Range stretch{cuts[c], cuts[c + 1]};
    next.clear();
    for (int h = head_begin; h < head_end;) {
      if (sets_[h].count_missing(stretch) == 0) {
        ++h;
        continue;
      }
      int end = h + 1;
      while (end < head_end && sets_[end].count_missing(stretch) > 0) ++end;
      // The same run of heads missing in the stretch before continues its piece.
      std::size_t i = 0;
      while (i < open.size() && (out[open[i]].head_begin != h || out[open[i]].head_end != end)) ++i;
      if (i < open.size()) {
        out[open[i]].tokens.end = stretch.end;
        next.push_back(open[i]);
      } else {
        out.push_back({stretch, h, end});
        next.push_back(out.size() - 1);
      }
      h = end;
    }
    std::swap(open, next);
  }
  for (int h = head_begin; h < head_end; ++h) sets_[h].add(tokens);
  return out;
}

Tokens RangeSet::size() const {
  Tokens total = 0;
  for (const auto& r : ranges_) total += r.size();
  return total;
}

}  // namespace fulcrum
