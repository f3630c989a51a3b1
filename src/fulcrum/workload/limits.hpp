// The largest workloads Fulcrum supports (docs/cli.md, "Supported limits"), checked where a document
// length, a batch shape or a GPU count enters. They are chosen so that every token and pair count derived
// from them is exact in 64 bits: a document's pairs are at most kMaxDocumentTokens^2 = 2^60 under any
// mask, and a batch's totals (up to 2^36 tokens x 2^30 pairs per token) are summed in floating point.
#pragma once

#include "fulcrum/core/interval.hpp"

namespace fulcrum {

/// The longest document, in tokens (2^30; also a bound on every token offset a mask spec names).
inline constexpr Tokens kMaxDocumentTokens = Tokens{1} << 30;
/// The most tokens one rank holds in a batch (tokens-per-rank).
inline constexpr Tokens kMaxTokensPerRank = Tokens{1} << 30;
/// The most ranks (attention servers) of a batch, and the most GPUs of a simulated job.
inline constexpr int kMaxRanks = 1 << 16;
/// The most tokens of one batch: ranks x tokens-per-rank.
inline constexpr Tokens kMaxBatchTokens = Tokens{1} << 36;

}  // namespace fulcrum
