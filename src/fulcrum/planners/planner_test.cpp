#include "fulcrum/planners/planner.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/core/random.hpp"
#include "fulcrum/plan/stats.hpp"
#include "fulcrum/plan/verify.hpp"
#include "fulcrum/planners/baselines/wlb.hpp"
#include "fulcrum/workload/length_source.hpp"
#include "fulcrum/workload/mask_test_cases.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace fulcrum {
namespace {

PlannerOptions options_for(Tokens granularity = 16, double tolerance = 0.1) {
  PlannerOptions o;
  o.model = model_shape_preset("tiny");
  o.granularity = granularity;
  o.tolerance = tolerance;
  o.cp_degree = 2;
  o.dcp_block = 48;  // several blocks per rank on the small random batches
  return o;
}

// A seeded random batch: 1-8 ranks, 64-1024 tokens each, lengths uniform or lognormal, any mask.
Batch random_batch(std::uint64_t seed) {
  Rng rng(seed);
  const int ranks = static_cast<int>(rng.uniform_int(1, 8));
  const Tokens tpr = 64 * rng.uniform_int(1, 16);
  const std::vector<MaskSpec> masks = testing::with_every_kind({MaskSpec::causal(),
                            MaskSpec::causal(),
                            MaskSpec::full(),
                            MaskSpec::sliding_window(96),
                            MaskSpec::lambda(16, 64),
                            MaskSpec::causal_blockwise(48, 2),
                            MaskSpec::shared_question(3, 20),
                            MaskSpec::vertical_slash({0, 1, 2, 3, 100, 700}, {0, 1, 2, 3, 64, 65, 500}),
                            MaskSpec::block_sparse(64, {{0, 0}, {1, 0}, {1, 1}, {2, 0}, {2, 2}, {3, 1}, {3, 3}, {7, 0},
                                                        {7, 6}, {7, 7}, {12, 3}, {20, 20}})});
  const auto mask = masks[rng.uniform_int(0, std::ssize(masks) - 1)];
  const std::string spec = rng.uniform() < 0.5 ? "uniform:1:" + std::to_string(2 * tpr) : "lognormal:5.5:1.2";
  auto source = make_length_source(spec, seed, tpr);
  BatchStream stream([&] { return source->next(); }, ranks, tpr, mask);
  return stream.next();
}

TEST(Planners, EveryPlanVerifiesOnAThousandRandomBatches) {
  for (const auto& name : planner_names()) {
    auto planner = make_planner(name, options_for());
    const auto caps = planner->capabilities();
    for (std::uint64_t seed = 0; seed < 1000; ++seed) {
      const Batch batch = random_batch(seed);
      const Assignment a = planner->plan(batch);
      const auto report = caps.keeps_documents ? verify(a, batch) : verify(a);
      ASSERT_TRUE(report.ok()) << name << " seed " << seed << ": " << report.summary();
    }
  }
}

TEST(Planners, CapabilitiesHold) {
  for (const auto& name : planner_names()) {
    auto planner = make_planner(name, options_for());
    const auto caps = planner->capabilities();
    for (std::uint64_t seed = 0; seed < 100; ++seed) {
      const Batch batch = random_batch(seed);
      const Assignment a = planner->plan(batch);
      if (caps.keeps_placement) {
        ASSERT_EQ(a.batch.segments.size(), batch.segments.size()) << name;
        for (std::size_t i = 0; i < batch.segments.size(); ++i) {
          EXPECT_EQ(a.batch.segments[i].rank, batch.segments[i].rank) << name;
          EXPECT_EQ(a.batch.segments[i].tokens, batch.segments[i].tokens) << name;
        }
      }
      if (!caps.moves_attention) {
        for (const auto& t : a.transfers) EXPECT_NE(t.kind, TensorKind::kQ) << name << ": Q moved";
      }
      if (!caps.splits_documents) {
        std::vector<int> servers(a.batch.documents.size(), -1);
        for (const auto& t : a.tasks) {
          EXPECT_TRUE(servers[t.doc] < 0 || servers[t.doc] == t.server) << name << ": document split";
          servers[t.doc] = t.server;
        }
      }
      for (const auto& doc : a.batch.documents) {
        EXPECT_NE(std::find(caps.masks.begin(), caps.masks.end(), doc.mask.kind), caps.masks.end());
      }
    }
  }
}

// Same seed, same plan, at any thread count: sim/thread_determinism_test.cpp (it compiles and simulates too).

TEST(Planners, DistcaBalancesWhatPackingLeavesImbalanced) {
  auto source = make_length_source("pretrain", 5, 65536);
  BatchStream stream([&] { return source->next(); }, 16, 65536);
  const auto model = model_shape_preset("llama3-8b");
  PlannerOptions o;
  o.model = model;
  for (int b = 0; b < 5; ++b) {
    const Batch batch = stream.next();
    const double packed = compute_stats(make_planner("packed", o)->plan(batch), model).imbalance;
    const double distca = compute_stats(make_planner("distca", o)->plan(batch), model).imbalance;
    EXPECT_LE(distca, 1.0 + o.tolerance + 1e-9) << "batch " << b << " (packed " << packed << ")";
    EXPECT_LE(distca, packed + 1e-9);
  }
}

TEST(Planners, WlbDefersDocumentsButNeverLosesTokens) {
  auto o = options_for();
  WlbPlanner wlb(o);
  auto source = make_length_source("lognormal:6:1.5", 8, 512);
  BatchStream stream([&] { return source->next(); }, 4, 512);
  Tokens in = 0, out = 0;
  for (int b = 0; b < 200; ++b) {
    const Batch batch = stream.next();
    in += batch.total_tokens();
    const Assignment a = wlb.plan(batch);
    out += a.batch.total_tokens();
    for (int r = 0; r < 4; ++r) {
      Tokens held = 0;
      for (const auto& s : a.batch.segments) held += s.rank == r ? s.tokens.size() : 0;
      EXPECT_LE(held, static_cast<Tokens>(1.5 * 512));
    }
  }
  EXPECT_EQ(in, out + wlb.deferred_tokens());
  EXPECT_GT(out, in * 9 / 10);  // deferral is the exception, not the rule
  // Draining on empty batches computes everything still waiting, a cap's worth per rank at a time.
  ASSERT_GT(wlb.deferred_documents(), 0u);
  wlb.drain();
  Batch empty{4, 512, {}, {}};
  for (int b = 0; b < 100 && wlb.deferred_documents() > 0; ++b) out += wlb.plan(empty).batch.total_tokens();
  EXPECT_EQ(wlb.deferred_documents(), 0u);
  EXPECT_EQ(in, out);
}

TEST(Planners, BadOptionsNameTheField) {
  auto o = options_for();
  const auto batch = random_batch(1);
  o.granularity = 0;
  EXPECT_THROW(make_planner("distca", o)->plan(batch), Error);
  o.granularity = batch.tokens_per_rank + 1;
  EXPECT_THROW(make_planner("distca", o)->plan(batch), Error);
  try {
    make_planner("ring-attention", options_for());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("planner = 'ring-attention'"), std::string::npos);
  }
}

}  // namespace
}  // namespace fulcrum
