#include "fulcrum/workload/mask.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/core/text.hpp"

#include <fmt/format.h>

#include <charconv>

namespace fulcrum {
namespace {

// Σ_{x=0}^{n-1} clamp(x, 0, width): the pairs of a band whose per-row count grows by one per row.
Tokens clamped_prefix_sum(Tokens n, Tokens width) {
  if (n <= 0) return 0;
  if (n <= width + 1) return n * (n - 1) / 2;
  return width * (width + 1) / 2 + (n - width - 1) * width;
}

// #{(q, k) : q in queries, k in keys, k <= q + c}.
Tokens band_pairs(Range queries, Range keys, Tokens c) {
  if (queries.empty() || keys.empty()) return 0;
  // Row q sees clamp(q + c + 1 - keys.begin, 0, |keys|) keys; sum over the query rows.
  const Tokens width = keys.size();
  const Tokens x0 = queries.begin + c + 1 - keys.begin;
  const Tokens x1 = queries.end + c + 1 - keys.begin;
  return clamped_prefix_sum(x1, width) - clamped_prefix_sum(x0, width);
}

Tokens parse_tokens(std::string_view text, std::string_view field) {
  Tokens value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size()) {
    fail("{} = '{}': not an integer", field, text);
  }
  return value;
}

}  // namespace

MaskSpec MaskSpec::sliding_window(Tokens window) {
  if (window < 1) fail("mask window = {}: must be >= 1", window);
  return {MaskKind::kSlidingWindow, window, 0};
}

MaskSpec MaskSpec::lambda(Tokens sink, Tokens window) {
  if (sink < 0) fail("mask sink = {}: must be >= 0", sink);
  if (window < 1) fail("mask window = {}: must be >= 1", window);
  return {MaskKind::kLambda, window, sink};
}

MaskSpec MaskSpec::parse(std::string_view text) {
  const auto parts = split_fields(text, ':');
  if (parts[0] == "causal" && parts.size() == 1) return causal();
  if (parts[0] == "full" && parts.size() == 1) return full();
  if (parts[0] == "window" && parts.size() == 2) return sliding_window(parse_tokens(parts[1], "mask window"));
  if (parts[0] == "lambda" && parts.size() == 3) {
    return lambda(parse_tokens(parts[1], "mask sink"), parse_tokens(parts[2], "mask window"));
  }
  fail("mask = '{}': expected causal, full, window:W or lambda:SINK:WINDOW", text);
}

std::string MaskSpec::to_string() const {
  switch (kind) {
    case MaskKind::kCausal: return "causal";
    case MaskKind::kFull: return "full";
    case MaskKind::kSlidingWindow: return fmt::format("window:{}", window);
    case MaskKind::kLambda: return fmt::format("lambda:{}:{}", sink, window);
  }
  return "?";
}

SmallRanges MaskSpec::visible(Tokens q, Tokens doc_len) const {
  switch (kind) {
    case MaskKind::kFull: return {{0, doc_len}};
    case MaskKind::kCausal: return {{0, q + 1}};
    case MaskKind::kSlidingWindow: return {{std::max<Tokens>(0, q - window + 1), q + 1}};
    case MaskKind::kLambda: {
      const Tokens window_begin = std::max<Tokens>(0, q - window + 1);
      const Tokens sink_end = std::min(sink, q + 1);
      if (sink_end >= window_begin) return {{0, q + 1}};
      if (sink_end == 0) return {{window_begin, q + 1}};
      return {{0, sink_end}, {window_begin, q + 1}};
    }
  }
  return {};
}

Tokens MaskSpec::count_pairs(Range queries, Range keys, Tokens doc_len) const {
  queries = intersect(queries, {0, doc_len});
  keys = intersect(keys, {0, doc_len});
  if (queries.empty() || keys.empty()) return 0;
  switch (kind) {
    case MaskKind::kFull: return queries.size() * keys.size();
    case MaskKind::kCausal: return band_pairs(queries, keys, 0);
    case MaskKind::kSlidingWindow: return band_pairs(queries, keys, 0) - band_pairs(queries, keys, -window);
    case MaskKind::kLambda:
      // Window pairs, plus sink keys the window no longer covers (k < sink and k <= q - window).
      return band_pairs(queries, keys, 0) - band_pairs(queries, keys, -window) +
             band_pairs(queries, intersect(keys, {0, sink}), -window);
  }
  return 0;
}

SmallRanges MaskSpec::keys_needed(Range queries, Range keys, Tokens doc_len) const {
  queries = intersect(queries, {0, doc_len});
  keys = intersect(keys, {0, doc_len});
  if (queries.empty() || keys.empty()) return {};
  // Visible-range endpoints never decrease with q, so the union over the rows is the first row's set,
  // the last row's set, and everything the moving (last) range sweeps between them.
  const auto first = visible(queries.begin, doc_len);
  const auto last = visible(queries.end - 1, doc_len);
  SmallRanges needed;
  needed.push(intersect(first[0], keys));
  needed.push(intersect({first.back().begin, last.back().end}, keys));
  if (last.size() == 2) needed.push(intersect(last[0], keys));
  needed.normalize();
  return needed;
}

TileKind MaskSpec::classify(Range queries, Range keys, Tokens doc_len) const {
  const Tokens pairs = count_pairs(queries, keys, doc_len);
  if (pairs == 0) return TileKind::kEmpty;
  if (pairs == intersect(queries, {0, doc_len}).size() * intersect(keys, {0, doc_len}).size()) {
    return TileKind::kFull;
  }
  return TileKind::kPartial;
}

std::vector<Tokens> MaskSpec::row_breakpoints(const std::vector<Tokens>& key_edges, Tokens doc_len) const {
  std::vector<Tokens> offsets;  // the c of every band k <= q + c this mask is built from
  std::vector<Tokens> edges = key_edges;
  switch (kind) {
    case MaskKind::kFull: break;
    case MaskKind::kCausal: offsets = {0}; break;
    case MaskKind::kSlidingWindow: offsets = {0, -window}; break;
    case MaskKind::kLambda:
      offsets = {0, -window};
      edges.push_back(sink);
      break;
  }
  std::vector<Tokens> rows;
  for (Tokens c : offsets) {
    for (Tokens k : edges) {
      // Row q's band edge q + c + 1 passes key edge k between rows k - c - 1 and k - c.
      for (Tokens q : {k - c - 1, k - c}) {
        if (q >= 0 && q <= doc_len) rows.push_back(q);
      }
    }
  }
  return rows;
}

}  // namespace fulcrum
