#include "fulcrum/planners/contract.hpp"

#include "fulcrum/core/error.hpp"

#include <gtest/gtest.h>

#include <functional>

namespace fulcrum {
namespace {

// Two ranks of 64 tokens: document 0 (100 tokens) on ranks 0 and 1, document 1 (28 tokens) on rank 1.
Batch two_ranks() { return pack_batch({{0, 100, MaskSpec::causal()}, {1, 28, MaskSpec::causal()}}, 2, 64); }

// What the packed planner plans: each rank its own rows.
Assignment own_rows(const Batch& b) {
  Assignment a{.planner = "test", .batch = b, .tasks = {}, .transfers = {}};
  for (const auto& s : b.segments) a.tasks.push_back({s.doc, {s.tokens, Range{}}, {0, s.tokens.end}, s.rank});
  return a;
}

PlannerCapabilities strict() {
  return {.moves_attention = false,
          .splits_documents = false,
          .keeps_documents = true,
          .keeps_placement = true,
          .masks = {MaskKind::kCausal}};
}

std::string error_of(const std::function<void()>& body, ErrorKind expected_kind) {
  try {
    body();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), expected_kind) << e.what();
    return e.what();
  }
  return "no error";
}

TEST(PlannerContract, AcceptsWhatTheCapabilitiesAllow) {
  const Batch b = two_ranks();
  PlannerCapabilities caps = strict();
  caps.splits_documents = true;  // document 0 spans both ranks
  EXPECT_NO_THROW(check_planner_contract(own_rows(b), b, caps));
  EXPECT_NO_THROW(check_planner_input(b, "test", caps));
  // Rank 1's rows of document 1 as two head ranges, where the capabilities allow it.
  Assignment heads = own_rows(b);
  heads.q_heads = 4;
  heads.tasks.back().heads = {0, 1};
  heads.tasks.push_back(heads.tasks.back());
  heads.tasks.back().heads = {1, 4};
  caps.splits_heads = true;
  EXPECT_NO_THROW(check_planner_contract(heads, b, caps));
}

TEST(PlannerContract, RejectsBrokenTasksAsInternalErrors) {
  const Batch b = two_ranks();
  PlannerCapabilities caps = strict();
  caps.splits_documents = true;
  auto broken = [&](const std::function<void(Assignment&)>& edit) {
    Assignment a = own_rows(b);
    edit(a);
    return error_of([&] { check_planner_contract(a, b, caps); }, ErrorKind::kInternal);
  };
  EXPECT_NE(broken([](Assignment& a) { a.tasks[0].server = 2; }).find("tasks[0].server = 2"), std::string::npos);
  EXPECT_NE(broken([](Assignment& a) { a.tasks[0].doc = 5; }).find("tasks[0].doc = 5"), std::string::npos);
  EXPECT_NE(broken([](Assignment& a) { a.tasks[1].queries[0].end = 101; }).find("leaves document 0"),
            std::string::npos);
  EXPECT_NE(broken([](Assignment& a) { a.tasks[1].keys = {0, 101}; }).find("tasks[1].keys"), std::string::npos);
  EXPECT_NE(broken([](Assignment& a) { a.tasks[1].division = 0; }).find("all tasks or none"), std::string::npos);
  EXPECT_NE(broken([](Assignment& a) { a.tasks[0].server = 1; }).find("attention never moves"), std::string::npos);
  EXPECT_NE(broken([](Assignment& a) {
              a.batch.segments[2].rank = 0;
              a.tasks[2].server = 0;
            }).find("placement"),
            std::string::npos);
  EXPECT_NE(broken([](Assignment& a) { a.batch.documents[1].mask = MaskSpec::sliding_window(4); }).find("keeps them"),
            std::string::npos);
  EXPECT_NE(broken([](Assignment& a) { a.batch.ranks = 3; }).find("batch.ranks = 3"), std::string::npos);
  EXPECT_NE(broken([](Assignment& a) { a.tasks[0].heads = {0, 2}; }).find("cover every head"), std::string::npos);
  caps.splits_heads = true;
  for (const HeadRange heads : {HeadRange{0, 2}, HeadRange{2, 2}, HeadRange{3, 5}, HeadRange{1, -1}}) {
    EXPECT_NE(broken([&](Assignment& a) {
                a.q_heads = heads.begin == 0 ? 0 : 4;  // [0, 2) is fine but needs the model's heads
                a.tasks[0].heads = heads;
              }).find(fmt::format("tasks[0].heads = [{}, {}): empty or outside", heads.begin, heads.end)),
              std::string::npos);
  }
  caps.splits_documents = false;
  EXPECT_NE(broken([](Assignment&) {}).find("never splits documents"), std::string::npos);
}

TEST(PlannerContract, RejectsBadBatchesAsBadInput) {
  const PlannerCapabilities caps = strict();
  auto bad = [&](const std::function<void(Batch&)>& edit) {
    Batch b = two_ranks();
    edit(b);
    return error_of([&] { check_planner_input(b, "test", caps); }, ErrorKind::kBadInput);
  };
  EXPECT_NE(bad([](Batch& b) { b.ranks = 0; }).find("ranks = 0"), std::string::npos);
  EXPECT_NE(bad([](Batch& b) { b.segments[0].rank = 7; }).find("batch.segments[0].rank = 7"), std::string::npos);
  EXPECT_NE(bad([](Batch& b) { b.segments[0].doc = -1; }).find("batch.segments[0].doc = -1"), std::string::npos);
  EXPECT_NE(bad([](Batch& b) { b.segments[0].tokens = {0, 500}; }).find("batch.segments[0].tokens"), std::string::npos);
  EXPECT_NE(bad([](Batch& b) { b.documents[1].mask = MaskSpec::full(); }).find("does not plan this mask"),
            std::string::npos);
}

}  // namespace
}  // namespace fulcrum
