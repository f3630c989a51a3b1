// `fulcrum profile --heads`: FlexAttn's runtime profile report on this machine (prefill/head_profile.hpp):
// one head's attention per pattern key of a head pattern report and the per-head projections, over a grid of
// prompt lengths, written as the JSON that `fulcrum heads --profile` and `fulcrum prefill --profile` read.
#pragma once

#include "fulcrum/core/interval.hpp"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace fulcrum::cli {

struct ProfileHeadsArgs {
  std::string model = "small-gqa";
  std::string patterns = "mixed";
  Tokens tokens = 0;  // the prompt a built-in report's parameters are scaled to; 0: the grid's largest
  std::vector<Tokens> prompt_tokens = {512, 1024, 2048};
  int threads = 1;  // one rank's share of this 2-core machine in a 2-rank prefill (cores / ranks)
  std::uint64_t seed = 1;
  bool extrapolate = false;
};

/// Adds the --heads options to `fulcrum profile`, each needing `heads_flag` (repeats and out are the command's).
void add_profile_heads_options(CLI::App& cmd, ProfileHeadsArgs& args, CLI::Option* heads_flag);
int run_profile_heads(const ProfileHeadsArgs& args, int repeats, const std::string& out);

}  // namespace fulcrum::cli
