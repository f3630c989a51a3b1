// The data of a `fulcrum run` job, generated where it is needed: every element of a document's Q, K,
// V and dO is a hash of (seed, field, document id, position, element), uniform in [-1, 1), so the rank
// that owns a token and the reference that recomputes the whole document produce the same values
// without moving any data. Then the single-process reference: whole documents through one attention
// call, compared on the rows each rank owns.
#pragma once

#include "fulcrum/plan/program.hpp"
#include "fulcrum/runtime/rank_buffers.hpp"
#include "fulcrum/sparse/synthetic_attention.hpp"
#include "fulcrum/workload/batch.hpp"

#include <array>
#include <cstdint>
#include <map>
#include <span>
#include <string_view>
#include <vector>

namespace fulcrum::runtime {

float token_value(std::uint64_t seed, Field field, std::int64_t doc_id, Tokens position, Tokens element);

/// The values of a job's inputs Q, K, V and dO: a function of (document, position), so the rank that
/// owns a token and the reference that recomputes the document agree without moving data. Positions are
/// the document's original ones: a document stored permuted (a striped mask) is asked at
/// `mask.source_position(slot)`, so every layout of a document computes on the same data.
class TokenData {
 public:
  virtual ~TokenData() = default;
  /// Row `position` of `field` of `doc`: heads.row_values(field) floats.
  virtual void row(const HeadLayout& heads, Field field, const Document& doc, Tokens position,
                   std::span<float> out) const = 0;
};

/// token_value: uniform in [-1, 1), no structure.
class HashedTokenData final : public TokenData {
 public:
  explicit HashedTokenData(std::uint64_t seed) : seed_(seed) {}
  void row(const HeadLayout& heads, Field field, const Document& doc, Tokens position,
           std::span<float> out) const override;

 private:
  std::uint64_t seed_;
};

/// sparse::SyntheticAttention per document (seeded by the seed and the document's id): attention with a
/// vertical-slash structure that differs per head and per document, what dynamic sparse masks estimate.
class SyntheticTokenData final : public TokenData {
 public:
  SyntheticTokenData(std::uint64_t seed, const HeadLayout& heads, const Batch& batch);
  void row(const HeadLayout& heads, Field field, const Document& doc, Tokens position,
           std::span<float> out) const override;
  const sparse::SyntheticAttention& document(std::int64_t doc_id) const;

 private:
  std::map<std::int64_t, sparse::SyntheticAttention> documents_;
};

/// Fills the rank's owned rows of every input buffer of `field` kinds Q, K, V and dO (fp32 plans).
void fill_inputs(const Plan& plan, const Batch& batch, const TokenData& data, RankBuffers& buffers);
inline void fill_inputs(const Plan& plan, const Batch& batch, std::uint64_t seed, RankBuffers& buffers) {
  fill_inputs(plan, batch, HashedTokenData(seed), buffers);
}

enum class ReferenceKind { kKernel, kFp64, kNone };
ReferenceKind parse_reference(std::string_view text);  // "kernel" | "fp64" | "none"
const char* to_string(ReferenceKind kind);

/// Per tensor (O, LSE, dQ, dK, dV): the largest |distributed - reference| and the largest |reference|
/// over the rank's owned rows. The relative error is the max of the first over the max of the second,
/// taken over all ranks.
struct ErrorParts {
  static constexpr std::array<const char*, 5> kNames = {"o", "lse", "dq", "dk", "dv"};
  std::array<double, 5> max_diff{};
  std::array<double, 5> max_ref{};
};

/// Recomputes every document the rank owns rows of in one process (`kernel`: the fused fp32 CPU
/// kernel; `fp64`: the materialised fp64 reference) and compares the rank's O and LSE (forward
/// buffers) and dQ, dK, dV (backward buffers).
ErrorParts compare_with_reference(const Plan& forward, RankBuffers& forward_buffers, const Plan& backward,
                                  RankBuffers& backward_buffers, const Batch& batch, const TokenData& data,
                                  ReferenceKind kind);
inline ErrorParts compare_with_reference(const Plan& forward, RankBuffers& forward_buffers, const Plan& backward,
                                         RankBuffers& backward_buffers, const Batch& batch, std::uint64_t seed,
                                         ReferenceKind kind) {
  return compare_with_reference(forward, forward_buffers, backward, backward_buffers, batch, HashedTokenData(seed),
                                kind);
}

}  // namespace fulcrum::runtime
