// DCP's placement hypergraph of one batch, partitioned flat into k parts by Fulcrum's multilevel
// partitioner, and written in hMetis format (with vertex and net weights) so bench/compare_kahypar.py
// can give KaHyPar the very same hypergraph. Balance is single-constraint here, as KaHyPar's is: a
// vertex weighs its share of the batch's FLOPs plus its share of the bytes held, in integer units.
//   dcp_partition --dataset pretrain --mask causal --block 1024 --parts 32 --epsilon 0.1 --out DIR
// Writes DIR/NAME.hgr and prints one JSON line: vertices, nets, fulcrum's λ−1 objective (KiB) and seconds.
#include "fulcrum/planners/dcp/blocks.hpp"
#include "fulcrum/planners/dcp/partitioner.hpp"
#include "fulcrum/workload/length_source.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/os.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>

using namespace fulcrum;

int main(int argc, char** argv) {
  CLI::App app("DCP placement hypergraph: Fulcrum's partition and an hMetis file for KaHyPar");
  std::string dataset = "pretrain", mask = "causal", model = "llama3-8b", out = ".", name = "dcp";
  int ranks = 32, parts = 32;
  Tokens tokens_per_rank = 4096, block = 1024;
  double epsilon = 0.1;
  std::uint64_t seed = 0;
  app.add_option("--dataset", dataset);
  app.add_option("--mask", mask);
  app.add_option("--model", model);
  app.add_option("--ranks", ranks, "ranks the batch is packed for (tokens = ranks x tokens-per-rank)");
  app.add_option("--tokens-per-rank", tokens_per_rank);
  app.add_option("--block", block);
  app.add_option("--parts", parts);
  app.add_option("--epsilon", epsilon);
  app.add_option("--seed", seed);
  app.add_option("--out", out, "folder of the .hgr file");
  app.add_option("--name", name, "file name without .hgr");
  int machines = 0, tries = 8, vcycles = dcp::PartitionConfig{}.vcycles;
  app.add_option("--tries", tries, "initial partitions tried (DCP's planner uses the default, 8)");
  app.add_option("--vcycles", vcycles, "V-cycles after the first multilevel pass (DCP's planner uses the default)");
  app.add_option(
      "--dcp-machines", machines,
      "also report DCP's own partition: two constraints, machines x (parts / machines), eps 0.4 / --epsilon");
  CLI11_PARSE(app, argc, argv);

  const auto shape = model_shape_preset(model);
  auto source = make_length_source(dataset, seed, tokens_per_rank);
  BatchStream stream([&] { return source->next(); }, ranks, tokens_per_rank, MaskSpec::parse(mask));
  const Batch batch = stream.next();
  const auto blocks = dcp::make_blocks(batch, block, shape);
  const auto two = dcp::placement_hypergraph(blocks, shape);

  // One integer weight per vertex: parts per million of the FLOPs plus of the bytes (at least 1, as
  // hMetis weights must be positive); net weights in KiB, so KaHyPar's 32-bit sums cannot overflow.
  const double flops = two.total_weight(0), bytes = two.total_weight(1);
  std::vector<double> weights;
  for (int v = 0; v < two.vertices(); ++v) {
    weights.push_back(std::max(1.0, std::round(1e6 * (two.weight(v, 0) / flops + two.weight(v, 1) / bytes))));
  }
  std::vector<std::vector<int>> nets;
  std::vector<double> net_weights;
  for (int e = 0; e < two.nets(); ++e) {
    nets.emplace_back(two.pins(e).begin(), two.pins(e).end());
    net_weights.push_back(std::max(1.0, std::round(two.net_weight(e) / 1024)));
  }
  const dcp::Hypergraph h(1, weights, net_weights, nets);

  auto file = fmt::output_file(out + "/" + name + ".hgr");
  file.print("{} {} 11\n", h.nets(), h.vertices());  // 11: net weights and vertex weights
  for (int e = 0; e < h.nets(); ++e) {
    file.print("{:.0f}", h.net_weight(e));
    for (int v : h.pins(e)) file.print(" {}", v + 1);
    file.print("\n");
  }
  for (int v = 0; v < h.vertices(); ++v) file.print("{:.0f}\n", h.weight(v, 0));
  file.close();

  const dcp::PartitionConfig config{.parts = parts,
                                    .epsilon = epsilon,
                                    .allow_heaviest_vertex = false,
                                    .seed = seed,
                                    .initial_tries = tries,
                                    .vcycles = vcycles};
  const auto start = std::chrono::steady_clock::now();
  const auto partition = dcp::partition(h, config);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto loads = dcp::part_weights(h, partition, parts);
  const double mean = h.total_weight(0) / parts;
  if (machines > 0) {
    const dcp::HierarchyConfig hierarchy{.machines = machines,
                                         .devices_per_machine = parts / machines,
                                         .epsilon_machines = 0.4,
                                         .epsilon_devices = epsilon,
                                         .seed = seed};
    const auto t0 = std::chrono::steady_clock::now();
    const auto device = dcp::partition_hierarchical(two, hierarchy);
    const double s2 = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const auto w = dcp::part_weights(two, device, parts);
    double most[2] = {0, 0};
    for (int p = 0; p < parts; ++p) {
      for (int c = 0; c < 2; ++c) most[c] = std::max(most[c], w[2 * static_cast<std::size_t>(p) + c]);
    }
    fmt::print(
        stderr, "dcp two-constraint hierarchical: km1 {:.1f} MB, compute imbalance {:.3f}, memory {:.3f}, {:.3f} s\n",
        dcp::connectivity_cost(two, device, parts) / 1e6, most[0] / (flops / parts), most[1] / (bytes / parts), s2);
  }
  fmt::print("{}\n", nlohmann::json{{"name", name},
                                    {"vertices", h.vertices()},
                                    {"nets", h.nets()},
                                    {"pins",
                                     [&] {
                                       std::size_t n = 0;
                                       for (int e = 0; e < h.nets(); ++e) n += h.pins(e).size();
                                       return n;
                                     }()},
                                    {"fulcrum_km1", dcp::connectivity_cost(h, partition, parts)},
                                    {"fulcrum_s", seconds},
                                    {"fulcrum_imbalance", *std::max_element(loads.begin(), loads.end()) / mean - 1}}
                         .dump());
  return 0;
}
