// One rank's part of a tensor-parallel prefill (FlexAttn's runtime): per layer, RMSNorm; Q/K/V projections
// of this rank's heads (with WPR from its reorganised weights, without WPR per head from the full
// matrices); RoPE; attention of all its heads with their own masks in one fused kernel call; its part of
// the O projection; all-reduce (sum) and residual; then the SwiGLU MLP over this rank's FFN rows, its
// all-reduce and residual. Weights stream from the weights file (CPIP: read ahead by a background thread;
// without CPIP: read when needed). fp32 throughout, GEMMs through OpenBLAS.
#pragma once

#include "fulcrum/prefill/prefill_spec.hpp"
#include "fulcrum/runtime/communicator.hpp"

#include <string>
#include <vector>

namespace fulcrum::prefill {

struct PrefillOptions {
  std::string weights_path;
  bool wpr = true;          // weight partition and reorganisation
  bool cpip = true;         // background weight prefetch
  int threads = 0;          // OpenMP threads of this rank's attention kernel (0: cores / ranks); BLAS: set_blas_threads
  int fail_read_part = -1;  // testing: reading this weight part (2l attention, 2l+1 MLP) fails, as a bad disk would
};

/// Seconds one rank spent on each step of one layer.
struct LayerTimes {
  double attention_s = 0;      // the fused attention call
  double projection_s = 0;     // RMSNorm, Q/K/V and O projections, RoPE
  double mlp_s = 0;            // RMSNorm, gate/up/down projections, SwiGLU
  double all_reduce_s = 0;     // both all-reduces, including waiting for slower ranks
  double prefetch_wait_s = 0;  // blocked on the weight stream (without CPIP: the reads themselves)
  double weight_bytes = 0;     // weights read from the file for this layer (WPR: only this rank's rows)
};

struct RankPrefill {
  std::vector<LayerTimes> layers;
  double total_s = 0;         // from the first layer's start to the final norm's end, this rank
  std::vector<float> hidden;  // the final hidden states after the final norm, [tokens][hidden]; every rank
};

/// Runs the prefill on this rank; every rank of `comm` calls it with the same spec and options.
/// Throws on bad input (spec.validate, the weights file's checks) before any communication.
RankPrefill run_prefill_rank(const PrefillSpec& spec, const PrefillOptions& options, runtime::Communicator& comm);

}  // namespace fulcrum::prefill
