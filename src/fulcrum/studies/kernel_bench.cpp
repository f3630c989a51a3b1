#include "fulcrum/studies/kernel_bench.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/core/memory_budget.hpp"
#include "fulcrum/core/simd_path.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <omp.h>

namespace fulcrum::studies {

void KernelBenchConfig::validate() const {
  shape.validate();
  kernels::parse_dtype(dtype);
  MaskSpec::parse(mask);
  if (repeats < 1 || repeats > kernels::kMaxMeasuredRepeats) {
    fail("repeats = {}: must be in [1, {}]", repeats, kernels::kMaxMeasuredRepeats);
  }
  for (Tokens l : lengths) {
    if (l < 1 || l > kernels::kMaxMeasuredLength) {
      fail("lengths: {} must be in [1, {}]", l, kernels::kMaxMeasuredLength);
    }
    check_memory_estimate(fmt::format("lengths: {}", l), kernels::measured_call_bytes(shape, l, l));
  }
  if (split_length < 0 || split_length > kernels::kMaxMeasuredLength) {
    fail("split-length = {}: must be in [0, {}] (0 skips the shard study)", split_length, kernels::kMaxMeasuredLength);
  }
  check_memory_estimate(fmt::format("split-length = {}", split_length),
                        kernels::measured_call_bytes(shape, split_length, split_length));
  for (Tokens s : shards) {
    if (s < 1) fail("shards: {} must be >= 1", s);
  }
  if (simd != "auto") simd::require_isa(simd, "simd");
}

KernelBench run_kernel_bench(const KernelBenchConfig& config, const std::function<void(int, int)>& progress) {
  config.validate();
  KernelBench bench;
  bench.config = config;
  bench.threads = omp_get_max_threads();
  // The ISA version asked for, for this study only (auto: the one the kernels run, FULCRUM_SIMD's or the best).
  const simd::Isa before = simd::active_isa();
  if (config.simd != "auto") simd::select_isa(simd::require_isa(config.simd, "simd"));
  struct Restore {
    simd::Isa isa;
    ~Restore() { simd::select_isa(isa); }
  } restore{before};
  bench.simd_path = simd::simd_path();
  // The roofline is measured before and after the kernels and the higher kept: on a shared machine a
  // single low reading would flatter every percentage.
  bench.peak_flops = kernels::measure_fma_peak();
  const auto dtype = kernels::parse_dtype(config.dtype);
  const MaskSpec mask = MaskSpec::parse(config.mask);
  const int cells = static_cast<int>(config.lengths.size() + (config.split_length > 0 ? config.shards.size() : 0));
  int done = 0;
  if (progress) progress(done, cells);
  auto record = [&](const char* study, Tokens length, Tokens shard, bool backward) {
    const auto tasks = kernels::sharded_document(length, shard, mask);
    const auto t = kernels::time_attention(tasks, config.shape, length, length, dtype, config.repeats, backward);
    const int n = static_cast<int>(tasks.size());
    bench.rows.push_back({study, "forward", length, shard, n, t.forward_s, t.forward_flops});
    if (backward) bench.rows.push_back({study, "backward", length, shard, n, t.backward_s, t.backward_flops});
    if (progress) progress(++done, cells);
  };
  for (Tokens length : config.lengths) record("length", length, length, config.backward);
  if (config.split_length > 0) {
    for (Tokens shard : config.shards) record("shards", config.split_length, shard, false);
  }
  bench.peak_flops = std::max(bench.peak_flops, kernels::measure_fma_peak());
  return bench;
}

}  // namespace fulcrum::studies
