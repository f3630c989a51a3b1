// `fulcrum bench kernels`: the machine's fp32 FMA peak, then the fused kernels on long causal
// documents (forward and backward) and on one document cut into ever smaller shards (DistCA's
// composability claim: throughput follows total work, not shard size), all in one run so the ratios
// are side by side.
#pragma once

#include "fulcrum/kernels/timing.hpp"

#include <functional>
#include <string>
#include <vector>

namespace fulcrum::studies {

/// The defaults are a quick look (about 45 s on 2 AVX2 cores); full_grid() is the study docs/performance.md
/// reports (minutes on a small CPU).
struct KernelBenchConfig {
  std::vector<Tokens> lengths = {2048, 8192};
  kernels::AttentionShape shape{8, 8, 128, 0};
  std::string mask = "causal";
  std::string dtype = "fp32";
  int repeats = 3;
  bool backward = true;
  Tokens split_length = 8192;  // the document the shard study cuts
  std::vector<Tokens> shards = {8192, 512};
  std::string simd = "auto";  // the kernels' ISA version: auto (FULCRUM_SIMD, else the best), avx512, avx2, baseline
  void validate() const;
  /// Lengths 4096, 16384 and 32768; a 32768-token document cut into shards of 32768, 4096, 512 and 128.
  void use_full_grid() {
    lengths = {4096, 16384, 32768};
    split_length = 32768;
    shards = {32768, 4096, 512, 128};
  }
};

struct KernelBenchRow {
  std::string study;  // "length" or "shards"
  std::string pass;   // "forward" or "backward"
  Tokens length = 0;
  Tokens shard = 0;
  int tasks = 0;
  double seconds = 0, flops = 0;
  double gflops() const { return flops / seconds / 1e9; }
};

struct KernelBench {
  KernelBenchConfig config;
  int threads = 0;
  std::string simd_path;  // which ISA version of the kernels ran (simd::simd_path())
  double peak_flops = 0;
  std::vector<KernelBenchRow> rows;
};

/// `progress(done, total)` after each cell (a length, or a shard size), for a progress line.
KernelBench run_kernel_bench(const KernelBenchConfig& config, const std::function<void(int, int)>& progress = {});

}  // namespace fulcrum::studies
