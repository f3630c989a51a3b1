// The fused kernels on MTraining's vsblocks masks against the dense causal kernel, in active-tile
// FLOP/s (docs/performance.md): one synthetic document (q_heads over one kv head), the estimator's
// per-head masks, and the same masks under MTraining's layouts (MaskSpec::striped over `ranks`,
// token-striped: block 1, block-striped: block G), with the buffers permuted into slot order. Every
// case is one task over the whole document; cases are timed in turn within each repetition.
//
// Active-tile FLOPs: 4 * head_dim * (rows x keys of every tile the kernel computes: the grid's 64 x 64
// tiles that the mask without its columns keeps, and the gathered-column tiles; mtraining_problem's
// active_tiles), over heads; backward 2.5x that. That is the work the kernel does (a partial tile
// costs a full one), so the ratio to the dense kernel measures the kernel, not the mask. The useful
// rate (4 * head_dim * visible pairs) is printed beside it. --clock cpu with OMP_NUM_THREADS=1 measures
// the process's CPU time: what the kernel takes on a machine that others share.
// Run: build/release/bin/sparse_kernel_bench --json sparse_kernel.json
#include "mtraining_problem.hpp"

#include "fulcrum/core/statistics.hpp"
#include "fulcrum/cost/attention_cost.hpp"

#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <nlohmann/json.hpp>
#include <omp.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace fulcrum::bench {
namespace {

struct Case {
  std::string name;
  MaskSpec layout;              // whose slot order the buffers use
  std::vector<MaskSpec> masks;  // per q head
  ActiveTiles tiles;
  double visible_pairs = 0;
  std::unique_ptr<AttentionBuffers> buffers;
  std::vector<kernels::AttentionTask> tasks;
  std::vector<double> forward_s, backward_s;
};

std::vector<MaskSpec> striped(const std::vector<MaskSpec>& masks, int ranks, Tokens block) {
  std::vector<MaskSpec> out;
  for (const auto& mask : masks) out.push_back(MaskSpec::striped(mask, ranks, block));
  return out;
}

int run(int argc, char** argv) {
  CLI::App app("Sparse (vsblocks) kernel throughput against the dense causal kernel, in active-tile FLOP/s");
  Tokens length = 16384;
  int q_heads = 1, head_dim = 128, repeats = 5, ranks = 4;
  double min_seconds = 0.2;
  std::uint64_t seed = 1;
  sparse::VerticalSlashOptions options;
  std::string json_path, only, clock_name = "wall", passes = "both";
  app.add_option("--length", length, "document length (a multiple of ranks x G)");
  app.add_option("--q-heads", q_heads, "q heads over the one kv head");
  app.add_option("--head-dim", head_dim);
  app.add_option("--gamma", options.gamma, "the estimator's recall target");
  app.add_option("--block", options.block, "the estimator's granularity G (also the block-striped layout's block)");
  app.add_option("--ranks", ranks, "ranks of the striped layouts");
  app.add_option("--repeats", repeats, "timed repetitions (medians)");
  app.add_option("--min-seconds", min_seconds, "a sample repeats the call until this long, then divides");
  app.add_option("--seed", seed, "synthetic pattern");
  app.add_option("--json", json_path, "also write the rows here");
  app.add_option("--only", only, "time only the case of this name (profiling; ratios are then to itself)");
  app.add_option("--clock", clock_name,
                 "wall, or cpu: the process's CPU time (with OMP_NUM_THREADS=1, what the "
                 "kernel itself takes on a shared machine)")
      ->check(CLI::IsMember({"wall", "cpu"}));
  app.add_option("--passes", passes, "time the forward, the backward or both (profiling one pass)")
      ->check(CLI::IsMember({"forward", "backward", "both"}));
  CLI11_PARSE(app, argc, argv);

  const Clock clock = clock_name == "cpu" ? Clock::kCpu : Clock::kWall;
  const SyntheticDocument doc(seed, q_heads, head_dim, length);
  const std::vector<MaskSpec> vs = vsblocks_masks(doc.estimate(options));
  const std::vector<MaskSpec> causal(static_cast<std::size_t>(q_heads), MaskSpec::causal());
  std::vector<Case> cases;
  auto add = [&](std::string name, std::vector<MaskSpec> masks) {
    if (!only.empty() && name != only) return;
    Case& c = cases.emplace_back();
    c.name = std::move(name);
    c.layout = masks.front();
    c.masks = std::move(masks);
  };
  add("dense causal", causal);
  add("vsblocks", vs);
  add(fmt::format("causal, token-striped {}x1", ranks), striped(causal, ranks, 1));
  add(fmt::format("vsblocks, token-striped {}x1", ranks), striped(vs, ranks, 1));
  add(fmt::format("causal, block-striped {}x{}", ranks, options.block), striped(causal, ranks, options.block));
  add(fmt::format("vsblocks, block-striped {}x{}", ranks, options.block), striped(vs, ranks, options.block));
  for (auto& c : cases) {
    c.tiles = active_tiles(c.masks, length);
    for (const auto& mask : c.masks) c.visible_pairs += static_cast<double>(mask.document_pairs(length));
    c.buffers = std::make_unique<AttentionBuffers>(doc, c.layout);
    c.tasks = c.buffers->document_task(c.masks);
    c.buffers->forward(c.tasks);  // warm-up
    if (passes != "forward") c.buffers->backward(c.tasks);
  }
  for (int r = 0; r < repeats; ++r) {
    for (auto& c : cases) {
      const auto time = [&](auto&& call, bool on) { return on ? seconds_per_call(call, min_seconds, clock) : 0.0; };
      c.forward_s.push_back(time([&] { c.buffers->forward(c.tasks); }, passes != "backward"));
      c.backward_s.push_back(time([&] { c.buffers->backward(c.tasks); }, passes != "forward"));
    }
  }

  const double causal_pairs = static_cast<double>(MaskSpec::causal().document_pairs(length)) * q_heads;
  const double flops_per_pair = 4.0 * head_dim, backward = kBackwardFlopsFactor;
  const double tiles_per_head = static_cast<double>((length + 63) / 64) * static_cast<double>((length + 63) / 64);
  fmt::print(
      "{} tokens, q heads {} over 1 kv head, head_dim {}, gamma {}, G {}, fp32, {} threads, {} time, median of {}\n",
      length, q_heads, head_dim, options.gamma, options.block, omp_get_max_threads(), clock_name, repeats);
  fmt::print("{:<30} {:>8} {:>8} {:>8} {:>9} {:>9} {:>7} {:>9} {:>9} {:>7} {:>9}\n", "case", "sparsity", "tiles %",
             "partial%", "fwd s", "fwd GF/s", "ratio", "bwd s", "bwd GF/s", "ratio", "useful f");
  nlohmann::json rows = nlohmann::json::array();
  double dense_fwd = 0, dense_bwd = 0;
  for (auto& c : cases) {
    const double fwd = median(c.forward_s), bwd = median(c.backward_s);
    const double active_flops = flops_per_pair * c.tiles.active_pairs;
    const double fwd_rate = active_flops / fwd / 1e9, bwd_rate = backward * active_flops / bwd / 1e9;
    if (dense_fwd == 0) dense_fwd = fwd_rate, dense_bwd = bwd_rate;
    const double active = c.tiles.full + c.tiles.partial;
    const double useful = flops_per_pair * c.visible_pairs / fwd / 1e9;
    const double sparsity = 1 - c.visible_pairs / causal_pairs;
    fmt::print("{:<30} {:>8.4f} {:>8.2f} {:>8.1f} {:>9.4f} {:>9.1f} {:>7.3f} {:>9.4f} {:>9.1f} {:>7.3f} {:>9.1f}\n",
               c.name, sparsity, 100 * active / (tiles_per_head * q_heads), 100 * c.tiles.partial / active, fwd,
               fwd_rate, fwd_rate / dense_fwd, bwd, bwd_rate, bwd_rate / dense_bwd, useful);
    rows.push_back({{"case", c.name},
                    {"mask", c.masks.front().to_string().substr(0, 200)},
                    {"sparsity", sparsity},
                    {"full_tiles", c.tiles.full},
                    {"partial_tiles", c.tiles.partial},
                    {"active_pairs", c.tiles.active_pairs},
                    {"visible_pairs", c.visible_pairs},
                    {"forward_s", fwd},
                    {"backward_s", bwd},
                    {"forward_active_gflops", fwd_rate},
                    {"backward_active_gflops", bwd_rate},
                    {"forward_ratio_to_dense", fwd_rate / dense_fwd},
                    {"backward_ratio_to_dense", bwd_rate / dense_bwd},
                    {"forward_useful_gflops", useful}});
  }
  if (!json_path.empty()) {
    const nlohmann::json out{{"tokens", length},
                             {"q_heads", q_heads},
                             {"kv_heads", 1},
                             {"head_dim", head_dim},
                             {"gamma", options.gamma},
                             {"block", options.block},
                             {"ranks", ranks},
                             {"repeats", repeats},
                             {"min_seconds", min_seconds},
                             {"seed", seed},
                             {"threads", omp_get_max_threads()},
                             {"clock", clock_name},
                             {"rows", rows}};
    std::ofstream(json_path) << out.dump(2) << '\n';
  }
  return 0;
}

}  // namespace
}  // namespace fulcrum::bench

int main(int argc, char** argv) { return fulcrum::bench::run(argc, argv); }
