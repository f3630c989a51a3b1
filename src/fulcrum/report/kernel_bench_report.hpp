// What `fulcrum bench kernels` prints and writes: the kernel benchmark as a table and as JSON.
#pragma once

#include "fulcrum/studies/kernel_bench.hpp"

#include <nlohmann/json.hpp>

#include <string>

namespace fulcrum {

std::string kernel_bench_table(const studies::KernelBench& bench);
nlohmann::json kernel_bench_json(const studies::KernelBench& bench);

}  // namespace fulcrum
