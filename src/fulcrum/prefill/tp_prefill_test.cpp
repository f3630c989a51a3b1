// The tensor-parallel prefill on thread ranks against the single-process fp64 reference.
//
// Tolerance: max |got − want| / max |want| <= 1e-5 over the final hidden states. The rank code is fp32 (BLAS
// GEMMs over 64-96 terms, the fused kernel's online softmax, all-reduce sums); the errors seen are 3-4e-7,
// and a wrong head, mask, slot or weight slice moves the result by O(1e-1).
#include "fulcrum/prefill/tp_prefill.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/planners/heads/scenarios.hpp"
#include "fulcrum/prefill/gemm.hpp"
#include "fulcrum/prefill/prefill_report.hpp"
#include "fulcrum/prefill/reference.hpp"
#include "fulcrum/prefill/test_model.hpp"
#include "fulcrum/runtime/local_communicator.hpp"

#include <gtest/gtest.h>

#include <mutex>

namespace fulcrum::prefill {
namespace {

using testing::TempWeights;
using testing::test_model;

constexpr double kTolerance = 1e-5;
constexpr Tokens kTokens = 80;

// A built-in head pattern report's masks (heads::report_masks, as `fulcrum prefill --patterns` runs them).
std::vector<std::vector<MaskSpec>> builtin_masks(const char* name, const ModelShape& shape) {
  return heads::report_masks(heads::builtin_head_patterns(name, shape, kTokens), shape.layers, kTokens, 11);
}

PrefillSpec mixed_spec(const HeadAssignment& assignment) {
  PrefillSpec spec;
  spec.shape = test_model();
  spec.tokens = kTokens;
  spec.head_masks = builtin_masks("mixed", spec.shape);
  spec.assignment = assignment;
  spec.seed = 11;
  return spec;
}

struct Outcome {
  std::vector<std::vector<float>> hidden;  // per rank
  PrefillReport report;
};

Outcome run_on_threads(const PrefillSpec& spec, const PrefillOptions& options, int ranks) {
  set_blas_threads(1);  // thread ranks share OpenBLAS: one thread each, no shared pool
  Outcome out;
  out.hidden.resize(static_cast<std::size_t>(ranks));
  std::mutex mutex;
  runtime::run_local_ranks(ranks, [&](runtime::Communicator& comm) {
    auto mine = run_prefill_rank(spec, options, comm);
    auto report = gather_prefill_report(mine, static_cast<long>(spec.tokens), comm);
    const std::lock_guard lock(mutex);
    out.hidden[static_cast<std::size_t>(comm.rank())] = std::move(mine.hidden);
    if (comm.rank() == 0) out.report = std::move(report);
  });
  return out;
}

struct Case {
  const char* name;
  int ranks;
  HeadAssignment assignment;
};

// Both layers differ; the 8 heads are 2 GQA groups of 4 (heads 0-3, 4-7).
std::vector<Case> cases() {
  const auto shape = test_model();
  return {
      {"one rank", 1, contiguous_assignment(shape, 1)},
      {"two ranks, contiguous", 2, contiguous_assignment(shape, 2)},
      {"two ranks, both groups split, 5 + 3 heads", 2, {{0, 1, 0, 0, 1, 0, 1, 0}, {1, 1, 1, 0, 0, 0, 0, 1}}},
      {"three ranks, uneven, group split three ways", 3, {{0, 1, 2, 0, 0, 0, 1, 1}, {2, 2, 2, 2, 2, 0, 1, 0}}},
      {"four ranks, one idle in layer 0", 4, {{0, 1, 2, 0, 1, 2, 0, 1}, {3, 3, 0, 1, 2, 3, 0, 1}}},
  };
}

TEST(TensorParallelPrefill, EqualsTheFp64ReferenceForEveryAssignmentWithAndWithoutWprAndCpip) {
  const auto shape = test_model();
  const TempWeights weights(shape, 5, "tp-prefill");
  const auto want = reference_prefill(mixed_spec(contiguous_assignment(shape, 1)), weights.path());
  for (const auto& c : cases()) {
    const PrefillSpec spec = mixed_spec(c.assignment);
    for (bool wpr : {true, false}) {
      for (bool cpip : {true, false}) {
        SCOPED_TRACE(fmt::format("{}, wpr {}, cpip {}", c.name, wpr, cpip));
        PrefillOptions options;
        options.weights_path = weights.path();
        options.wpr = wpr;
        options.cpip = cpip;
        options.threads = 1;
        const auto out = run_on_threads(spec, options, c.ranks);
        const double error = max_relative_error(out.hidden[0], want);
        EXPECT_LE(error, kTolerance);
        for (int r = 1; r < c.ranks; ++r) EXPECT_EQ(out.hidden[static_cast<std::size_t>(r)], out.hidden[0]);
        ASSERT_EQ(out.report.ranks, c.ranks);
        ASSERT_EQ(out.report.times[0].size(), 2U);
        EXPECT_GT(out.report.tokens_per_s(), 0);
      }
    }
  }
}

TEST(TensorParallelPrefill, MasksMatter) {
  // The same run with every head causal differs from the mixed masks' reference: the check can fail.
  const auto shape = test_model();
  const TempWeights weights(shape, 5, "tp-prefill-masks");
  const auto mixed = reference_prefill(mixed_spec(contiguous_assignment(shape, 1)), weights.path());
  PrefillSpec causal = mixed_spec(contiguous_assignment(shape, 2));
  causal.head_masks = builtin_masks("full", shape);
  PrefillOptions options;
  options.weights_path = weights.path();
  options.threads = 1;
  const auto out = run_on_threads(causal, options, 2);
  EXPECT_GT(max_relative_error(out.hidden[0], mixed), 100 * kTolerance);
  EXPECT_LE(max_relative_error(out.hidden[0], reference_prefill(causal, weights.path())), kTolerance);
}

TEST(TensorParallelPrefill, BadInputFailsBeforeAnyCommunication) {
  const auto shape = test_model();
  const TempWeights weights(shape, 5, "tp-prefill-bad");
  PrefillOptions options;
  options.weights_path = weights.path();
  auto message = [&](const PrefillSpec& spec, int ranks) {
    try {
      run_on_threads(spec, options, ranks);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  auto spec = mixed_spec(contiguous_assignment(shape, 2));
  spec.assignment[0][6] = 2;
  EXPECT_NE(message(spec, 2).find("assignment[0][6] = 2"), std::string::npos);
  spec = mixed_spec(contiguous_assignment(shape, 2));
  spec.head_masks[1][3] = MaskSpec::vertical_slash({0, 500}, {0});
  EXPECT_NE(message(spec, 2).find("head_masks[1][3]"), std::string::npos);
  spec = mixed_spec(contiguous_assignment(shape, 2));
  spec.shape.head_dim = 15;
  EXPECT_NE(message(spec, 2).find("head_dim"), std::string::npos);
  spec = mixed_spec(contiguous_assignment(shape, 2));
  spec.shape.ffn_hidden = 128;  // another model than the file's
  EXPECT_NE(message(spec, 2).find("header.ffn_hidden = 96"), std::string::npos);
}

TEST(TensorParallelPrefill, WithWprARankReadsOnlyItsHeadsRows) {
  const auto shape = test_model();  // hidden 64, 8 q heads of 16 in 2 groups, FFN 96
  const TempWeights weights(shape, 5, "tp-prefill-bytes");
  PrefillOptions options;
  options.weights_path = weights.path();
  options.threads = 1;
  const double row = 64 * sizeof(float), mlp = (1 + 3 * 48) * row;  // 2 ranks: 48 FFN rows each
  for (bool wpr : {true, false}) {
    options.wpr = wpr;
    const auto out = run_on_threads(mixed_spec(contiguous_assignment(shape, 2)), options, 2);
    // WPR: norm, 4 heads' w_q and w_o rows, one group's w_k and w_v rows; without: the full matrices.
    const double attention = wpr ? (1 + 4 * 16 + 16 + 16 + 4 * 16) * row : (1 + 128 + 32 + 32 + 128) * row;
    for (int r = 0; r < 2; ++r) EXPECT_EQ(out.report.rank_total(r).weight_bytes, 2 * (attention + mlp)) << wpr;
  }
}

TEST(TensorParallelPrefill, AFailedWeightReadOnOneRankEndsEveryRankWithItsMessage) {
  const auto shape = test_model();
  const TempWeights weights(shape, 5, "tp-prefill-fail");
  const PrefillSpec spec = mixed_spec({{0, 1, 2, 0, 1, 2, 0, 1}, {0, 1, 2, 0, 1, 2, 0, 1}});
  set_blas_threads(1);
  for (bool cpip : {true, false}) {
    try {
      runtime::run_local_ranks(3, [&](runtime::Communicator& comm) {
        PrefillOptions options;
        options.weights_path = weights.path();
        options.cpip = cpip;
        options.threads = 1;
        if (comm.rank() == 1) options.fail_read_part = 2;  // layer 1's attention weights
        run_prefill_rank(spec, options, comm);
      });
      FAIL() << "no error";
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("rank 1: "), std::string::npos) << message;
      EXPECT_NE(message.find("reading layer 1 attention weights failed"), std::string::npos) << message;
    }
  }
}

}  // namespace
}  // namespace fulcrum::prefill
