// `--mask vslash-dynamic:GAMMA[:G]`: MTraining's dynamic sparse attention in a job. Every rank draws the
// same batch; the data is synthetic attention with a vertical-slash structure (sparse/
// synthetic_attention.hpp); per document and q head the online estimator (sparse/estimator.hpp) runs
// over the ranks, each with the keys it holds in the batch as packed (the observation rows broadcast
// from the rank holding the document's tail, the softmax normalised with global max and sum), and
// the index becomes the head's `vsblocks` mask, identical on every rank. Then the job plans the
// documents with those per-head masks as with any other.
#pragma once

#include "fulcrum/runtime/attention_data.hpp"
#include "fulcrum/runtime/communicator.hpp"
#include "fulcrum/sparse/dynamic_mask.hpp"
#include "fulcrum/workload/batch.hpp"

namespace fulcrum::studies {

using sparse::DynamicMaskSpec;
using sparse::parse_dynamic_mask;

struct DynamicMaskStats {
  int documents = 0;      // documents estimated (shorter than the observation window or G stay causal)
  double recall_min = 1;  // over documents and q heads: the attention mass of the observation rows kept
  double recall_mean = 1;
  double sparsity = 0;  // 1 - visible pairs / causal pairs, over the estimated documents and heads
};

/// Sets `batch`'s per-head masks on every rank (collective over `comm`; the same batch on every rank).
DynamicMaskStats estimate_dynamic_masks(Batch& batch, const HeadLayout& heads, const runtime::TokenData& data,
                                        const DynamicMaskSpec& spec, runtime::Communicator& comm);

}  // namespace fulcrum::studies
