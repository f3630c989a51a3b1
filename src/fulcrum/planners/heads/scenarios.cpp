#include "fulcrum/planners/heads/scenarios.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/core/random.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>

namespace fulcrum::heads {
namespace {

// How a scenario lays out its types: a repeated sequence ("FFFFFFFFAAAAAAAA" repeated once), or each
// head drawn at random from `types`.
struct ScenarioSpec {
  std::string_view name;
  int devices;
  int heads;
  std::string_view arrangement;
  std::string_view sequence;  // repeated to `heads` heads; empty: random
  std::string_view types;     // the types a random head draws from
};

constexpr std::array<ScenarioSpec, 10> kScenarios = {{
    {"S1", 2, 16, "8 F then 8 A", "FFFFFFFFAAAAAAAA", ""},
    {"S2", 2, 16, "(F, A, V, B) repeated 4 times", "FAVB", ""},
    {"S3", 2, 16, "the four types at random", "", "FAVB"},
    {"S4", 4, 32, "16 F then 16 A", "FFFFFFFFFFFFFFFFAAAAAAAAAAAAAAAA", ""},
    {"S5", 4, 32, "(F, A, V, B) repeated 8 times", "FAVB", ""},
    {"S6", 4, 36, "(A, V, B) repeated 12 times", "AVB", ""},
    {"S7", 4, 32, "the four types at random", "", "FAVB"},
    {"S8", 4, 32, "F and A at random", "", "FA"},
    {"S9", 4, 72, "A, V, B at random", "", "AVB"},
    {"S10", 8, 72, "the four types at random", "", "FAVB"},
}};

}  // namespace

HeadPattern scenario_pattern(char type) {
  switch (type) {
    case 'F': return HeadPattern::full();
    case 'A': return HeadPattern::a_shape(128, 4096);
    case 'V': return HeadPattern::vertical_slash(1000, 6096);
    case 'B': return HeadPattern::block_sparse_density(64, 0.1);
    default: FULCRUM_CHECK(false, "scenario pattern type '{}'", type);
  }
}

std::vector<std::string> scenario_names() {
  std::vector<std::string> names;
  names.reserve(kScenarios.size());
  for (const auto& s : kScenarios) names.emplace_back(s.name);
  return names;
}

Scenario scenario(std::string_view name, std::uint64_t seed) {
  for (const auto& spec : kScenarios) {
    if (spec.name != name) continue;
    Scenario s{
        std::string(spec.name), std::string(spec.arrangement), spec.devices, spec.heads / kScenarioGroupSize, {}};
    Rng rng(mix64(seed) ^ static_cast<std::uint64_t>(spec.heads * 131 + spec.devices));
    for (int h = 0; h < spec.heads; ++h) {
      const auto i = static_cast<std::size_t>(h);
      const char type = spec.sequence.empty() ? spec.types[static_cast<std::size_t>(rng.uniform_int(
                                                    0, static_cast<std::int64_t>(spec.types.size()) - 1))]
                                              : spec.sequence[i % spec.sequence.size()];
      s.heads.push_back(scenario_pattern(type));
    }
    return s;
  }
  fail("scenario = '{}': unknown; choose from {}", name, fmt::join(scenario_names(), ", "));
}

bool is_builtin_head_patterns(std::string_view name) { return name == "mixed" || name == "full"; }

HeadPatternReport builtin_head_patterns(std::string_view name, const ModelShape& model, Tokens prompt_len) {
  FULCRUM_CHECK(is_builtin_head_patterns(name), "built-in head patterns '{}'", name);
  FULCRUM_CHECK(prompt_len >= 1, "prompt of {} tokens", prompt_len);
  const Tokens t = prompt_len;
  const std::array<HeadPattern, 4> kinds = {
      HeadPattern::full(), HeadPattern::a_shape(std::max<Tokens>(1, t / 32), std::max<Tokens>(1, t / 8)),
      HeadPattern::vertical_slash(std::max<Tokens>(1, t / 8), std::max<Tokens>(1, t / 16)),
      HeadPattern::block_sparse_blocks(std::min<Tokens>(64, std::max<Tokens>(1, t / 8)), 4)};
  HeadPatternReport r;
  r.model = model.name;
  r.description = fmt::format("built-in '{}' for {} tokens", name, prompt_len);
  r.q_heads = model.q_heads;
  r.kv_heads = model.kv_heads;
  r.layers.resize(static_cast<std::size_t>(model.layers));
  for (int l = 0; l < model.layers; ++l) {
    for (int h = 0; h < model.q_heads; ++h) {
      const auto kind = name == "full" ? 0 : static_cast<std::size_t>((h + l) % 4);
      r.layers[static_cast<std::size_t>(l)].push_back(kinds[kind]);
    }
  }
  return r;
}

HeadPatternReport load_head_patterns(const std::string& source, const ModelShape& model, Tokens prompt_len) {
  HeadPatternReport r =
      is_builtin_head_patterns(source) ? builtin_head_patterns(source, model, prompt_len) : read_head_patterns(source);
  r.check_model(model);
  return r;
}

}  // namespace fulcrum::heads
