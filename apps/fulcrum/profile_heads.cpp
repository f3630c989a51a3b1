#include "profile_heads.hpp"

#include "commands.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/planners/heads/scenarios.hpp"
#include "fulcrum/prefill/head_profile.hpp"
#include "fulcrum/report/table.hpp"
#include "fulcrum/workload/model_config.hpp"
#include "outputs.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>

namespace fulcrum::cli {

void add_profile_heads_options(CLI::App& cmd, ProfileHeadsArgs& a, CLI::Option* heads_flag) {
  add_model_option(cmd, a.model, "--heads: its head dim and hidden size")->needs(heads_flag);
  cmd.add_option("--patterns", a.patterns, "--heads: head pattern report (JSON) | mixed | full: its pattern keys")
      ->capture_default_str()
      ->needs(heads_flag);
  cmd.add_option("--tokens", a.tokens, "--heads: prompt length a built-in report is made for (0: the grid's largest)")
      ->capture_default_str()
      ->needs(heads_flag);
  cmd.add_option("--prompt-tokens", a.prompt_tokens, "--heads: the grid of prompt lengths")
      ->delimiter(',')
      ->capture_default_str()
      ->needs(heads_flag);
  cmd.add_option("--threads", a.threads,
                 "--heads: kernel and BLAS threads (0: every core); match the prefill's per rank (cores / ranks)")
      ->capture_default_str()
      ->needs(heads_flag);
  cmd.add_option("--seed", a.seed, "--heads: seed of the data and of the masks' scattered lines")
      ->capture_default_str()
      ->needs(heads_flag);
  cmd.add_flag("--extrapolate", a.extrapolate, "--heads: the profile allows lengths outside the grid")
      ->needs(heads_flag);
}

int run_profile_heads(const ProfileHeadsArgs& a, int repeats, const std::string& out) {
  const ModelShape shape = resolve_model_shape(a.model);
  if (a.prompt_tokens.empty()) fail("prompt-tokens: give at least one length");
  if (a.tokens < 0 || a.tokens > heads::kMaxPatternTokens) {
    fail("tokens = {}: must be in [0, {}] (0: the grid's largest)", a.tokens, heads::kMaxPatternTokens);
  }
  const Tokens made_for = a.tokens > 0 ? a.tokens : *std::max_element(a.prompt_tokens.begin(), a.prompt_tokens.end());
  const auto report = heads::load_head_patterns(a.patterns, shape, std::max<Tokens>(1, made_for));
  prefill::HeadProfileConfig config;
  config.head_dim = shape.head_dim;
  config.hidden = shape.hidden;
  config.prompt_tokens = a.prompt_tokens;
  config.patterns = prefill::profiled_patterns(report, shape.layers);
  config.repeats = repeats;
  config.threads = a.threads;
  config.seed = a.seed;
  config.extrapolate = a.extrapolate;
  const auto profile = prefill::profile_heads(config, [](int done, int total) {
    std::fprintf(stderr, "\rprofiling %d/%d (length, pattern) cells", done, total);
    if (done == total) std::fprintf(stderr, "\n");
  });
  std::vector<std::string> header = {"ms per head \\ prompt tokens"};
  for (Tokens t : profile.prompt_tokens) header.push_back(std::to_string(t));
  Table table(header);
  auto row = [&](const std::string& name, const std::vector<double>& values) {
    std::vector<std::string> cells = {name};
    for (double v : values) cells.push_back(fmt::format("{:.3f}", v * 1e3));
    table.add_row(cells);
  };
  row("t_qkvo", profile.qkvo_s);
  row("t_qo", profile.qo_s);
  for (const auto& p : config.patterns) row(p.key(), profile.attention_s.at(p.key()));
  fmt::print("{}: {} ({})\n{}", shape.name, profile.device, a.patterns, table.to_string());
  write_output_json("json", out, profile.to_json());
  fmt::print("wrote {}\n", out);
  return 0;
}

}  // namespace fulcrum::cli
