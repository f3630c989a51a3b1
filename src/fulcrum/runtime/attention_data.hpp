// The data of a `fulcrum run` job, generated where it is needed: every element of a document's Q, K,
// V and dO is a hash of (seed, field, document id, position, element), uniform in [-1, 1), so the rank
// that owns a token and the reference that recomputes the whole document produce the same values
// without moving any data. Then the single-process reference: whole documents through one attention
// call, compared on the rows each rank owns.
#pragma once

#include "fulcrum/plan/program.hpp"
#include "fulcrum/runtime/rank_buffers.hpp"
#include "fulcrum/workload/batch.hpp"

#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace fulcrum::runtime {

float token_value(std::uint64_t seed, Field field, std::int64_t doc_id, Tokens position, Tokens element);

/// Fills the rank's owned rows of every input buffer of `field` kinds Q, K, V and dO (fp32 plans).
void fill_inputs(const Plan& plan, const Batch& batch, std::uint64_t seed, RankBuffers& buffers);

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
                                  RankBuffers& backward_buffers, const Batch& batch, std::uint64_t seed,
                                  ReferenceKind kind);

}  // namespace fulcrum::runtime
