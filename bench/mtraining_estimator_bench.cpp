// MTraining's online estimator against the sparse attention it guides (docs/performance.md): per
// length, one synthetic document (q_heads q heads over one kv head), the estimator over all heads,
// then the sparse forward and backward kernels of those heads under the vsblocks masks it produced,
// one task over the whole document. The three are timed in turn within each repetition (interleaved,
// so load on the shared machine hits them alike); medians are divided by q_heads: seconds per head
// and step. Both sides run on all OpenMP threads (the estimator parallel over heads, so give it at
// least as many heads as threads).
// Run: build/release/bin/mtraining_estimator_bench --json estimator.json
#include "mtraining_problem.hpp"

#include "fulcrum/core/statistics.hpp"

#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <nlohmann/json.hpp>
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace fulcrum::bench {
namespace {

struct Row {
  Tokens length = 0;
  double sparsity = 0, recall_min = 1;
  double estimate_s = 0, forward_s = 0, backward_s = 0;  // median seconds per head
};

Row measure(Tokens length, int q_heads, int head_dim, const sparse::VerticalSlashOptions& options, int repeats,
            std::uint64_t seed) {
  const SyntheticDocument doc(seed, q_heads, head_dim, length);
  const auto estimate = doc.estimate(options);  // warm-up, and the masks every repetition uses
  const std::vector<MaskSpec> masks = vsblocks_masks(estimate);
  AttentionBuffers buffers(doc, MaskSpec::causal());
  const auto tasks = buffers.document_task(masks);
  buffers.forward(tasks);  // warm-up: the kernels' per-thread workspaces
  buffers.backward(tasks);

  Row row{length, sparsity(masks, length)};
  for (const auto& index : estimate.heads) row.recall_min = std::min(row.recall_min, index.recall);
  std::vector<double> est, fwd, bwd;
  for (int r = 0; r < repeats; ++r) {
    est.push_back(seconds([&] { doc.estimate(options); }));
    fwd.push_back(seconds([&] { buffers.forward(tasks); }));
    bwd.push_back(seconds([&] { buffers.backward(tasks); }));
  }
  row.estimate_s = median(est) / q_heads;
  row.forward_s = median(fwd) / q_heads;
  row.backward_s = median(bwd) / q_heads;
  return row;
}

int run(int argc, char** argv) {
  CLI::App app("MTraining's vertical-slash estimator: its cost against the sparse attention it guides");
  std::vector<Tokens> lengths{32768, 65536, 131072};
  int q_heads = 2, head_dim = 64, repeats = 3;
  std::uint64_t seed = 1;
  sparse::VerticalSlashOptions options;
  std::string json_path;
  app.add_option("--lengths", lengths, "document lengths")->delimiter(',');
  app.add_option("--q-heads", q_heads, "q heads over the one kv head");
  app.add_option("--head-dim", head_dim);
  app.add_option("--gamma", options.gamma, "the estimator's recall target");
  app.add_option("--block", options.block, "the estimator's granularity G");
  app.add_option("--repeats", repeats, "timed repetitions (medians)");
  app.add_option("--seed", seed, "synthetic pattern");
  app.add_option("--json", json_path, "also write the rows here");
  CLI11_PARSE(app, argc, argv);

  fmt::print("q heads {} over 1 kv head, head_dim {}, gamma {}, G {}, fp32, {} threads, median of {}\n", q_heads,
             head_dim, options.gamma, options.block, omp_get_max_threads(), repeats);
  fmt::print("{:>8} {:>8} {:>7} {:>11} {:>11} {:>11} {:>9} {:>11}\n", "tokens", "sparsity", "recall", "estimate s",
             "forward s", "backward s", "est/fwd", "est/(f+b)");
  nlohmann::json rows = nlohmann::json::array();
  for (const Tokens length : lengths) {
    const Row r = measure(length, q_heads, head_dim, options, repeats, seed);
    const double per_fwd = r.estimate_s / r.forward_s, per_step = r.estimate_s / (r.forward_s + r.backward_s);
    fmt::print("{:>8} {:>8.4f} {:>7.4f} {:>11.4f} {:>11.4f} {:>11.4f} {:>8.2f}% {:>10.2f}%\n", r.length, r.sparsity,
               r.recall_min, r.estimate_s, r.forward_s, r.backward_s, 100 * per_fwd, 100 * per_step);
    std::fflush(stdout);
    rows.push_back({{"tokens", r.length},
                    {"sparsity", r.sparsity},
                    {"recall_min", r.recall_min},
                    {"estimate_s_per_head", r.estimate_s},
                    {"forward_s_per_head", r.forward_s},
                    {"backward_s_per_head", r.backward_s},
                    {"estimate_over_forward", per_fwd},
                    {"estimate_over_forward_backward", per_step}});
  }
  if (!json_path.empty()) {
    const nlohmann::json out{{"q_heads", q_heads},
                             {"kv_heads", 1},
                             {"head_dim", head_dim},
                             {"gamma", options.gamma},
                             {"block", options.block},
                             {"repeats", repeats},
                             {"threads", omp_get_max_threads()},
                             {"seed", seed},
                             {"rows", rows}};
    std::ofstream(json_path) << out.dump(2) << '\n';
  }
  return 0;
}

}  // namespace
}  // namespace fulcrum::bench

int main(int argc, char** argv) { return fulcrum::bench::run(argc, argv); }
