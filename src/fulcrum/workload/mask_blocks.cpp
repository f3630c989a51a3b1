// Causal-blockwise and shared-question: causal masks with a "staircase" cut out. Rows come in segments
// (blocks, answers); a row of segment t sees causal keys except one key range [e0, e0 + t·len) whose
// end steps up by a segment per segment. Every endpoint is constant within a segment except q + 1,
// so pair counts are closed forms and the shape changes only at segment starts.
#include "fulcrum/workload/mask_kinds.hpp"

#include <algorithm>

namespace fulcrum::mask_detail {
namespace {

// Σ over q in `rows` of |keys ∩ [e0, e0 + t(q)·len)|, where t(q) = (q - base) / len is q's segment.
// `rows` start at or after `base`. O(1): the first and last segments directly, the full segments
// between them as a clamped arithmetic series.
Tokens staircase_excluded(Range rows, Range keys, Tokens base, Tokens len, Tokens e0) {
  if (rows.empty() || keys.empty()) return 0;
  const Tokens lo = std::max(keys.begin, e0);
  const Tokens hi = std::max(lo, keys.end);
  if (hi == lo) return 0;
  auto cut = [&](Tokens t) { return std::clamp(e0 + t * len, lo, hi) - lo; };
  const Tokens t0 = (rows.begin - base) / len;
  const Tokens t1 = (rows.end - 1 - base) / len;
  if (t0 == t1) return rows.size() * cut(t0);
  Tokens total = (base + (t0 + 1) * len - rows.begin) * cut(t0) + (rows.end - (base + t1 * len)) * cut(t1);
  const Tokens ta = t0 + 1, tb = t1 - 1;  // full segments
  if (ta > tb) return total;
  // cut(t) is 0 while e0 + t·len <= lo, hi - lo once e0 + t·len >= hi, and e0 + t·len - lo between.
  const Tokens rising_first = std::max(ta, (lo - e0) / len + 1);
  const Tokens top_first = std::max(ta, ceil_div(hi - e0, len));
  const Tokens rising_last = std::min(tb, top_first - 1);
  Tokens sum = 0;
  if (rising_first <= rising_last) {
    const Tokens n = rising_last - rising_first + 1;
    sum += n * (e0 - lo) + len * ((rising_first + rising_last) * n / 2);
  }
  if (top_first <= tb) sum += (tb - top_first + 1) * (hi - lo);
  return total + len * sum;
}

// ---- causal-blockwise ----------------------------------------------------------------------------

Tokens last_block(const MaskSpec& m, Tokens doc_len) { return (doc_len - 1) / m.block; }
// First key of block j's window: block j - W (no product formed when W reaches past the start).
Tokens window_begin(const MaskSpec& m, Tokens j) {
  const Tokens first = j - m.window_blocks;
  return first <= 0 ? 0 : first * m.block;
}

// ---- shared-question -----------------------------------------------------------------------------

struct Answers {
  Tokens question;  // rows [0, question) are the question
  Tokens step;      // answer i starts at question + i·step; the last one runs to the document's end
  Tokens count;

  Tokens start(Tokens i) const { return question + i * step; }
  Tokens last_start() const { return start(count - 1); }
  Tokens index_of(Tokens q) const { return step == 0 ? count - 1 : std::min(count - 1, (q - question) / step); }
};

Answers answers_of(const MaskSpec& m, Tokens doc_len) {
  const Tokens question = std::min(doc_len, std::max<Tokens>(1, doc_len * m.question_percent / 100));
  return {question, std::max<Tokens>(0, (doc_len - question) / m.answers), m.answers};
}

}  // namespace

bool blockwise_allows(const MaskSpec& m, Tokens q, Tokens k, Tokens doc_len) {
  if (k > q) return false;
  const Tokens j = q / m.block;
  if (j == last_block(m, doc_len)) return true;  // the test block sees everything before it
  return k < m.block || k >= window_begin(m, j);
}

SmallRanges blockwise_visible(const MaskSpec& m, Tokens q, Tokens doc_len) {
  const Tokens j = q / m.block;
  if (j == last_block(m, doc_len)) return {{0, q + 1}};
  const Tokens sink_end = std::min(m.block, q + 1);
  const Tokens begin = window_begin(m, j);
  if (begin <= sink_end) return {{0, q + 1}};
  return {{0, sink_end}, {begin, q + 1}};
}

Tokens blockwise_pairs(const MaskSpec& m, Range queries, Range keys, Tokens doc_len) {
  // Rows of block j in [W + 1, last) lose keys [B, (j - W)·B) = [B, B + t·B) with t = j - (W + 1).
  const Tokens last = last_block(m, doc_len);
  if (m.window_blocks >= last - 1) return band_pairs(queries, keys, 0);  // no block loses anything
  const Tokens base = (m.window_blocks + 1) * m.block;
  const Range cut_rows = intersect(queries, {base, last * m.block});
  return band_pairs(queries, keys, 0) - staircase_excluded(cut_rows, keys, base, m.block, m.block);
}

SmallRanges blockwise_keys_needed(const MaskSpec& m, Range queries, Range keys, Tokens doc_len) {
  SmallRanges needed;
  if ((queries.end - 1) / m.block == last_block(m, doc_len)) {
    needed.push(intersect({0, queries.end}, keys));  // the last row sees a superset of every other row
    return needed;
  }
  // Within a block the sets grow with q; block j + 1's window starts no later than block j + 1 itself,
  // which the rows of block j reach. So the windows join into one range from the first block's window.
  needed.push(intersect({0, std::min(m.block, queries.end)}, keys));
  needed.push(intersect({window_begin(m, queries.begin / m.block), queries.end}, keys));
  needed.normalize();
  return needed;
}

void blockwise_shape_rows(const MaskSpec& m, Tokens doc_len, std::vector<Tokens>& rows) {
  for (Tokens j = 1; j <= last_block(m, doc_len); ++j) rows.push_back(j * m.block);
}

bool shared_question_allows(const MaskSpec& m, Tokens q, Tokens k, Tokens doc_len) {
  if (k > q) return false;
  const Answers a = answers_of(m, doc_len);
  return q < a.question || k < a.question || k >= a.start(a.index_of(q));
}

SmallRanges shared_question_visible(const MaskSpec& m, Tokens q, Tokens doc_len) {
  const Answers a = answers_of(m, doc_len);
  if (q < a.question) return {{0, q + 1}};
  const Tokens begin = a.start(a.index_of(q));
  if (begin <= a.question) return {{0, q + 1}};
  return {{0, a.question}, {begin, q + 1}};
}

Tokens shared_question_pairs(const MaskSpec& m, Range queries, Range keys, Tokens doc_len) {
  // Answer i's rows lose keys [question, question + i·step); the last answer's rows lose
  // [question, last_start) (it is longer than the others by the remainder).
  const Answers a = answers_of(m, doc_len);
  const Range staircase_rows = intersect(queries, {a.question, a.last_start()});
  const Range last_rows = intersect(queries, {a.last_start(), doc_len});
  return band_pairs(queries, keys, 0) - staircase_excluded(staircase_rows, keys, a.question, a.step, a.question) -
         last_rows.size() * intersect(keys, {a.question, a.last_start()}).size();
}

SmallRanges shared_question_keys_needed(const MaskSpec& m, Range queries, Range keys, Tokens doc_len) {
  const Answers a = answers_of(m, doc_len);
  SmallRanges needed;
  if (queries.begin < a.question) needed.push(intersect({0, std::min(queries.end, a.question)}, keys));
  if (queries.end > a.question) {
    // Each answer's rows reach its end, where the next answer starts: one range from the first answer.
    needed.push(intersect({0, a.question}, keys));
    needed.push(intersect({a.start(a.index_of(std::max(queries.begin, a.question))), queries.end}, keys));
  }
  needed.normalize();
  return needed;
}

void shared_question_shape_rows(const MaskSpec& m, Tokens doc_len, std::vector<Tokens>& rows) {
  // The first answer's rows see [0, q + 1) like the question's; every later answer starts a new shape.
  const Answers a = answers_of(m, doc_len);
  if (a.step > 0) {
    for (Tokens i = 1; i < a.count; ++i) rows.push_back(a.start(i));
  }
}

}  // namespace fulcrum::mask_detail
