#include "fulcrum/planners/heads/patterns.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/core/random.hpp"
#include "fulcrum/core/text.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <unordered_set>
#include <utility>

namespace fulcrum::heads {
namespace {

constexpr std::array<std::pair<PatternKind, std::string_view>, 4> kKindNames = {{
    {PatternKind::kFull, "full"},
    {PatternKind::kAShape, "a-shape"},
    {PatternKind::kVerticalSlash, "vertical-slash"},
    {PatternKind::kBlockSparse, "block-sparse"},
}};

std::string kind_choices() {
  std::string out;
  for (const auto& [kind, name] : kKindNames) out += (out.empty() ? "" : ", ") + std::string(name);
  return out;
}

PatternKind parse_kind(std::string_view name, std::string_view where) {
  for (const auto& [kind, n] : kKindNames) {
    if (n == name) return kind;
  }
  fail("{}.kind = '{}': unknown; choose from {}", where, name, kind_choices());
}

void check_range(std::string_view where, std::string_view field, Tokens value, Tokens lo, Tokens hi) {
  if (value < lo || value > hi) fail("{}.{} = {}: must be in [{}, {}]", where, field, value, lo, hi);
}

// k distinct values of [lo, hi), sorted; Floyd's algorithm, or its complement when k is most of the range,
// so the cost is O(min(k, n - k)) draws whatever the budget.
std::vector<Tokens> sample_distinct(Rng& rng, Tokens lo, Tokens hi, Tokens k) {
  const Tokens n = hi - lo;
  FULCRUM_CHECK(k >= 0 && k <= n, "sample {} of {}", k, n);
  const bool complement = 2 * k > n;
  const Tokens draws = complement ? n - k : k;
  std::unordered_set<Tokens> chosen;
  chosen.reserve(static_cast<std::size_t>(draws) * 2);
  for (Tokens j = n - draws; j < n; ++j) {
    const Tokens t = rng.uniform_int(0, j);
    if (!chosen.insert(t).second) chosen.insert(j);
  }
  std::vector<Tokens> out;
  out.reserve(static_cast<std::size_t>(k));
  if (complement) {
    for (Tokens v = 0; v < n; ++v) {
      if (chosen.count(v) == 0) out.push_back(lo + v);
    }
  } else {
    for (Tokens v : chosen) out.push_back(lo + v);
    std::sort(out.begin(), out.end());
  }
  return out;
}

// Half of a budget (rounded up) taken from the front [0, near), the rest scattered over [near, len).
std::vector<Tokens> near_and_scattered(Rng& rng, Tokens budget, Tokens len) {
  const Tokens take = std::min(budget, len);
  const Tokens near = (take + 1) / 2;
  std::vector<Tokens> out(static_cast<std::size_t>(near));
  for (Tokens i = 0; i < near; ++i) out[static_cast<std::size_t>(i)] = i;
  const auto far = sample_distinct(rng, near, len, take - near);
  out.insert(out.end(), far.begin(), far.end());
  return out;
}

MaskSpec block_sparse_mask(const HeadPattern& p, Tokens prompt_len, Rng& rng) {
  const Tokens rows = (prompt_len + p.block - 1) / p.block;
  std::vector<std::pair<Tokens, Tokens>> pairs;
  for (Tokens i = 0; i < rows; ++i) {
    const Tokens causal = i + 1;
    const Tokens keep =
        p.blocks > 0
            ? std::min(causal, p.blocks)
            : std::clamp(static_cast<Tokens>(std::llround(p.density * static_cast<double>(causal))), Tokens{1}, causal);
    pairs.emplace_back(i, i);
    if (keep >= 2) pairs.emplace_back(i, 0);
    if (keep >= 3) {
      for (Tokens k : sample_distinct(rng, 1, i, keep - 2)) pairs.emplace_back(i, k);
    }
  }
  return MaskSpec::block_sparse(p.block, std::move(pairs));
}

}  // namespace

std::string_view pattern_kind_name(PatternKind kind) {
  for (const auto& [k, name] : kKindNames) {
    if (k == kind) return name;
  }
  FULCRUM_CHECK(false, "pattern kind {}", static_cast<int>(kind));
}

HeadPattern HeadPattern::a_shape(Tokens sink, Tokens window) {
  HeadPattern p;
  p.kind = PatternKind::kAShape;
  p.sink = sink;
  p.window = window;
  return p;
}

HeadPattern HeadPattern::vertical_slash(Tokens verticals, Tokens slashes) {
  HeadPattern p;
  p.kind = PatternKind::kVerticalSlash;
  p.verticals = verticals;
  p.slashes = slashes;
  return p;
}

HeadPattern HeadPattern::block_sparse_blocks(Tokens block, Tokens blocks) {
  HeadPattern p;
  p.kind = PatternKind::kBlockSparse;
  p.block = block;
  p.blocks = blocks;
  return p;
}

HeadPattern HeadPattern::block_sparse_density(Tokens block, double density) {
  HeadPattern p;
  p.kind = PatternKind::kBlockSparse;
  p.block = block;
  p.density = density;
  return p;
}

std::string HeadPattern::key() const {
  switch (kind) {
    case PatternKind::kFull: return "full";
    case PatternKind::kAShape: return fmt::format("a-shape:{}:{}", sink, window);
    case PatternKind::kVerticalSlash: return fmt::format("vertical-slash:{}:{}", verticals, slashes);
    case PatternKind::kBlockSparse:
      return blocks > 0 ? fmt::format("block-sparse:{}:blocks={}", block, blocks)
                        : fmt::format("block-sparse:{}:density={:g}", block, density);
  }
  FULCRUM_CHECK(false, "pattern kind {}", static_cast<int>(kind));
}

HeadPattern HeadPattern::parse(std::string_view key) {
  const auto fields = split_fields(key, ':');
  const std::string where = fmt::format("pattern '{}'", key);
  HeadPattern p;
  p.kind = parse_kind(fields.empty() ? std::string_view() : fields[0], where);
  const std::size_t expected = p.kind == PatternKind::kFull ? 1 : 3;
  if (fields.size() != expected) {
    fail(
        "{}: expected {} fields (full | a-shape:SINK:WINDOW | vertical-slash:V:S | block-sparse:B:blocks=K | "
        "block-sparse:B:density=P)",
        where, expected);
  }
  auto integer = [&](std::string_view view, std::string_view field) {
    const std::string text(view);
    try {
      std::size_t used = 0;
      const long long v = std::stoll(text, &used);
      if (used == text.size()) return static_cast<Tokens>(v);
    } catch (const std::exception&) {}
    fail("{}.{} = '{}': must be a whole number", where, field, text);
  };
  switch (p.kind) {
    case PatternKind::kFull: break;
    case PatternKind::kAShape:
      p.sink = integer(fields[1], "sink");
      p.window = integer(fields[2], "window");
      break;
    case PatternKind::kVerticalSlash:
      p.verticals = integer(fields[1], "verticals");
      p.slashes = integer(fields[2], "slashes");
      break;
    case PatternKind::kBlockSparse: {
      p.block = integer(fields[1], "block");
      const std::string last(fields[2]);
      if (last.rfind("blocks=", 0) == 0) {
        p.blocks = integer(last.substr(7), "blocks");
      } else if (last.rfind("density=", 0) == 0) {
        try {
          p.density = std::stod(last.substr(8));
        } catch (const std::exception&) {
          fail("{}.density = '{}': must be a number in (0, 1]", where, last.substr(8));
        }
      } else {
        fail("{}: third field '{}' must be blocks=K or density=P", where, last);
      }
      break;
    }
  }
  p.validate(where);
  return p;
}

void HeadPattern::validate(std::string_view where) const {
  switch (kind) {
    case PatternKind::kFull: return;
    case PatternKind::kAShape:
      check_range(where, "sink", sink, 0, kMaxPatternTokens);
      check_range(where, "window", window, 1, kMaxPatternTokens);
      return;
    case PatternKind::kVerticalSlash:
      check_range(where, "verticals", verticals, 0, kMaxPatternTokens);
      check_range(where, "slashes", slashes, 1, kMaxPatternTokens);
      return;
    case PatternKind::kBlockSparse:
      check_range(where, "block", block, 1, kMaxBlockTokens);
      if ((blocks > 0) == (density > 0)) {
        fail(
            "{}: block-sparse takes exactly one of blocks (in [1, {}]) and density (in (0, 1]); got blocks = {}, "
            "density = {}",
            where, kMaxPatternTokens, blocks, density);
      }
      if (blocks > 0) check_range(where, "blocks", blocks, 1, kMaxPatternTokens);
      if (!(density <= 1.0) || density < 0) fail("{}.density = {}: must be in (0, 1]", where, density);
      return;
  }
  FULCRUM_CHECK(false, "pattern kind {}", static_cast<int>(kind));
}

void HeadPatternReport::check_model(const ModelShape& m) const {
  if (q_heads != m.q_heads)
    fail("patterns.q_heads = {}: must equal model {}'s q_heads = {}", q_heads, m.name, m.q_heads);
  if (kv_heads != m.kv_heads) {
    fail("patterns.kv_heads = {}: must equal model {}'s kv_heads = {}", kv_heads, m.name, m.kv_heads);
  }
  if (std::cmp_less(layers.size(), m.layers)) {
    fail("patterns.layers = {} layers: must be at least model {}'s layers = {} (extra layers are ignored)",
         layers.size(), m.name, m.layers);
  }
}

HeadPatternReport head_patterns_from_json(const JsonValue& root) {
  root.only_keys({"model", "description", "q_heads", "kv_heads", "layers"});
  HeadPatternReport r;
  if (auto v = root.find("model")) r.model = v->string();
  if (auto v = root.find("description")) r.description = v->string();
  r.q_heads = root.at("q_heads").integer<int>(1, 65536);
  const JsonValue kv = root.at("kv_heads");
  r.kv_heads = kv.integer<int>(1, r.q_heads);
  if (r.q_heads % r.kv_heads != 0) kv.fail_must(fmt::format("a divisor of q_heads = {}", r.q_heads));
  for (const JsonValue& layer : root.at("layers").elements(1, JsonValue::kAnySize, "an array of at least one layer")) {
    layer.only_keys({"heads"});
    const JsonValue heads = layer.at("heads");
    const auto q = static_cast<std::size_t>(r.q_heads);
    LayerPatterns patterns;
    for (const JsonValue& h : heads.elements(q, q, fmt::format("an array of q_heads = {} heads", r.q_heads))) {
      const std::string where = (h.source().empty() ? "" : h.source() + ": ") + h.path();
      HeadPattern p;
      p.kind = parse_kind(h.at("kind").string(), where);
      // Each kind reads its own parameters and rejects the others', so a misplaced parameter is reported.
      switch (p.kind) {
        case PatternKind::kFull: h.only_keys({"kind"}); break;
        case PatternKind::kAShape:
          h.only_keys({"kind", "sink", "window"});
          p.sink = h.at("sink").integer<Tokens>(0, kMaxPatternTokens);
          p.window = h.at("window").integer<Tokens>(1, kMaxPatternTokens);
          break;
        case PatternKind::kVerticalSlash:
          h.only_keys({"kind", "verticals", "slashes"});
          p.verticals = h.at("verticals").integer<Tokens>(0, kMaxPatternTokens);
          p.slashes = h.at("slashes").integer<Tokens>(1, kMaxPatternTokens);
          break;
        case PatternKind::kBlockSparse:
          h.only_keys({"kind", "block", "blocks", "density"});
          p.block = h.at("block").integer<Tokens>(1, kMaxBlockTokens);
          if (h.has("blocks") == h.has("density")) h.fail_here("block-sparse takes exactly one of blocks and density");
          if (auto b = h.find("blocks")) p.blocks = b->integer<Tokens>(1, kMaxPatternTokens);
          if (auto d = h.find("density")) {
            p.density = d->number(0.0, 1.0);
            if (p.density <= 0) d->fail_must("in (0, 1]");
          }
          break;
      }
      p.validate(where);
      patterns.push_back(p);
    }
    r.layers.push_back(std::move(patterns));
  }
  return r;
}

HeadPatternReport head_patterns_from_json(const nlohmann::json& json, std::string source) {
  const JsonDocument doc(json, std::move(source), "patterns");
  return head_patterns_from_json(doc.root());
}

HeadPatternReport read_head_patterns(const std::string& path) {
  const JsonDocument doc = JsonDocument::read_file(path, "patterns");
  return head_patterns_from_json(doc.root());
}

nlohmann::json to_json(const HeadPattern& p) {
  nlohmann::json j = {{"kind", pattern_kind_name(p.kind)}};
  switch (p.kind) {
    case PatternKind::kFull: break;
    case PatternKind::kAShape:
      j["sink"] = p.sink;
      j["window"] = p.window;
      break;
    case PatternKind::kVerticalSlash:
      j["verticals"] = p.verticals;
      j["slashes"] = p.slashes;
      break;
    case PatternKind::kBlockSparse:
      j["block"] = p.block;
      if (p.blocks > 0) {
        j["blocks"] = p.blocks;
      } else {
        j["density"] = p.density;
      }
      break;
  }
  return j;
}

nlohmann::json to_json(const HeadPatternReport& r) {
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& layer : r.layers) {
    nlohmann::json heads = nlohmann::json::array();
    for (const auto& p : layer) heads.push_back(to_json(p));
    layers.push_back({{"heads", heads}});
  }
  nlohmann::json j = {{"q_heads", r.q_heads}, {"kv_heads", r.kv_heads}, {"layers", layers}};
  if (!r.model.empty()) j["model"] = r.model;
  if (!r.description.empty()) j["description"] = r.description;
  return j;
}

MaskSpec to_mask(const HeadPattern& pattern, Tokens prompt_len, std::uint64_t seed) {
  pattern.validate("pattern");
  if (prompt_len < 1) fail("prompt tokens = {}: must be >= 1", prompt_len);
  Rng rng(seed);
  switch (pattern.kind) {
    case PatternKind::kFull: return MaskSpec::causal();
    case PatternKind::kAShape: return MaskSpec::lambda(pattern.sink, pattern.window);
    case PatternKind::kVerticalSlash: {
      auto verticals = near_and_scattered(rng, pattern.verticals, prompt_len);
      auto slashes = near_and_scattered(rng, pattern.slashes, prompt_len);
      return MaskSpec::vertical_slash(std::move(verticals), std::move(slashes));
    }
    case PatternKind::kBlockSparse: return block_sparse_mask(pattern, prompt_len, rng);
  }
  FULCRUM_CHECK(false, "pattern kind {}", static_cast<int>(pattern.kind));
}

std::vector<std::vector<MaskSpec>> report_masks(const HeadPatternReport& report, int layers, Tokens prompt_len,
                                                std::uint64_t seed) {
  FULCRUM_CHECK(layers >= 0 && std::cmp_less_equal(layers, report.layers.size()), "{} layers of a {}-layer report",
                layers, report.layers.size());
  std::vector<std::vector<MaskSpec>> out(static_cast<std::size_t>(layers));
  for (int l = 0; l < layers; ++l) {
    const auto& patterns = report.layers[static_cast<std::size_t>(l)];
    for (std::size_t h = 0; h < patterns.size(); ++h) {
      out[static_cast<std::size_t>(l)].push_back(
          to_mask(patterns[h], prompt_len, head_mask_seed(seed, l, static_cast<int>(h))));
    }
  }
  return out;
}

std::uint64_t head_mask_seed(std::uint64_t seed, int layer, int head) {
  return mix64(mix64(seed ^ 0x48454144u) + static_cast<std::uint64_t>(layer) * 0x10000u +
               static_cast<std::uint64_t>(head));
}

}  // namespace fulcrum::heads
