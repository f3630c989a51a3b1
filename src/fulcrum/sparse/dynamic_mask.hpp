// "vslash-dynamic:GAMMA[:G]": MTraining's dynamic per-head vertical-slash masks as a mask choice of
// `fulcrum run` and `fulcrum simulate`. Documents get the index the online estimator finds on synthetic
// attention data of that document (synthetic_attention.hpp, seeded by the job's seed and the document's
// id, so every sample and head has its own pattern), as per-head `vsblocks` masks. `fulcrum run`
// estimates on its ranks (studies/dynamic_masks.hpp); the simulator, which has no data, estimates in one
// process (synthetic_head_masks).
#pragma once

#include "fulcrum/sparse/estimator.hpp"
#include "fulcrum/sparse/synthetic_attention.hpp"
#include "fulcrum/workload/mask.hpp"

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace fulcrum::sparse {

struct DynamicMaskSpec {
  double gamma = 0.9;  // the estimator's recall target, in (0, 1]
  Tokens block = 64;   // G
  /// The estimator's options for this spec (cap at least one block).
  VerticalSlashOptions options() const;
};
/// The spec of "vslash-dynamic:GAMMA[:G]", nullopt for any other mask text; bad values fail() naming the
/// field and its range.
std::optional<DynamicMaskSpec> parse_dynamic_mask(std::string_view text);
/// Whether a document of `length` tokens is estimated (it holds the observation window and a block);
/// shorter ones keep their causal mask.
bool estimates(const DynamicMaskSpec& spec, Tokens length);

/// The synthetic data of document `doc_id` of a job seeded `seed`: the one definition of its seeding.
SyntheticAttention synthetic_document(std::uint64_t seed, std::int64_t doc_id, const EstimatorShape& shape,
                                      Tokens length);

/// The vsblocks mask of one head's index.
MaskSpec to_mask(const VerticalSlashIndex& index);

/// Single process: the estimator over the whole synthetic document; one index per q head.
std::vector<VerticalSlashIndex> synthetic_head_indices(std::uint64_t seed, std::int64_t doc_id,
                                                       const EstimatorShape& shape, Tokens length,
                                                       const DynamicMaskSpec& spec);

}  // namespace fulcrum::sparse
