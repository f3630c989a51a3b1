// One rank's weights of one layer, as the compute wants them. With WPR (FlexAttn's weight partition and
// reorganisation) a rank reads only its heads' rows and lays them out contiguous in local order: its
// heads' w_q rows, the w_k/w_v rows of the KV groups it needs, its heads' w_o rows. Without WPR it holds the
// layer's full matrices as stored and the compute indexes each head's slice inside them.
// The MLP is tensor-parallel either way: rank r holds FFN rows [r·F/N, (r+1)·F/N) of w_gate, w_up, w_down.
#pragma once

#include "fulcrum/core/interval.hpp"
#include "fulcrum/prefill/head_assignment.hpp"
#include "fulcrum/prefill/weights_file.hpp"

#include <vector>

namespace fulcrum::prefill {

struct AttentionWeights {
  int layer = -1;
  bool reorganised = false;  // WPR: rows in RankHeads order; else the full matrices
  std::vector<float> norm;   // [hidden]
  std::vector<float> wq, wk, wv, wo;
};

struct MlpWeights {
  int layer = -1;
  std::vector<float> norm;            // [hidden]
  std::vector<float> gate, up, down;  // [ffn rows of this rank][hidden]
};

/// One unit the weight stream moves: a layer's attention part or its MLP part.
struct WeightPart {
  AttentionWeights attention;
  MlpWeights mlp;
};

/// Fills `out` (reusing its memory) with layer `layer`'s attention weights for `heads`.
void load_attention(const WeightsFile& file, int layer, int head_dim, const RankHeads& heads, bool wpr,
                    AttentionWeights& out);
/// Fills `out` with layer `layer`'s MLP rows `ffn`.
void load_mlp(const WeightsFile& file, int layer, Range ffn, MlpWeights& out);

/// Rank `rank`'s FFN rows of `ranks`: [rank·F/N, (rank+1)·F/N).
Range ffn_rows(int ffn_hidden, int ranks, int rank);

}  // namespace fulcrum::prefill
