// Seeded document-length sources: the two embedded real-data samples and synthetic distributions.
#pragma once

#include "fulcrum/core/interval.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace fulcrum {

class LengthSource {
 public:
  virtual ~LengthSource() = default;
  /// The next document length in tokens (>= 1).
  virtual Tokens next() = 0;
};

/// Builds a source from a spec:
///   pretrain          DistCA's "Pretrain" batches from the WLB-LLM sample (embedded tables)
///   prolong           DistCA's "ProLong" batches from the ProLong sample
///   uniform:MIN:MAX   integer lengths uniform in [MIN, MAX]
///   lognormal:MU:SIGMA  round(exp(N(MU, SIGMA))), at least 1 and at most kMaxDocumentTokens
///   file:PATH         lengths from a file (one per line, or a JSON array), drawn without replacement
/// `tokens_per_rank` (in [1, kMaxDocumentTokens], else an error naming tokens-per-rank) sets the dataset
/// sources' elongation factor max(1, tokens_per_rank / 65536).
/// Every length a source can produce is at most kMaxDocumentTokens (workload/limits.hpp): a MAX, a file's
/// length or an elongation beyond it is an error here. Errors name the field `dataset`.
std::unique_ptr<LengthSource> make_length_source(std::string_view spec, std::uint64_t seed, Tokens tokens_per_rank);

/// The lengths of a `file:PATH` dataset from the file's text: a JSON array when it starts with '[', else one
/// integer per line (blank lines skipped). Every length in [1, kMaxDocumentTokens]; errors name `path` and the
/// element or line.
std::vector<Tokens> parse_lengths(const std::string& text, const std::string& path);

}  // namespace fulcrum
