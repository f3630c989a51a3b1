#include "fulcrum/prefill/head_assignment.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/prefill/test_model.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace fulcrum::prefill {
namespace {

using testing::test_model;

TEST(HeadAssignment, ContiguousBlocksAreMegatronsSplit) {
  const auto shape = test_model();  // 8 heads
  const auto a = contiguous_assignment(shape, 3);
  ASSERT_EQ(a.size(), 2U);
  EXPECT_EQ(a[0], (std::vector<int>{0, 0, 1, 1, 1, 2, 2, 2}));
  EXPECT_EQ(a[1], a[0]);
  EXPECT_THROW(contiguous_assignment(shape, 9), Error);
  EXPECT_THROW(contiguous_assignment(shape, 0), Error);
}

TEST(HeadAssignment, RankHeadsLayOutSplitGroupsInPaddedSlots) {
  const auto shape = test_model();  // groups of 4: heads 0-3 group 0, 4-7 group 1
  const std::vector<int> layer = {1, 0, 1, 1, 0, 2, 2, 1};
  const RankHeads r1 = rank_heads(layer, shape, 1);
  EXPECT_EQ(r1.heads, (std::vector<int>{0, 2, 3, 7}));
  EXPECT_EQ(r1.groups, (std::vector<int>{0, 1}));
  EXPECT_EQ(r1.group_begin, (std::vector<int>{0, 3, 4}));
  EXPECT_EQ(r1.slots_per_group, 3);
  EXPECT_EQ(r1.slots(), 6);
  EXPECT_EQ(r1.slot(0), 0);
  EXPECT_EQ(r1.slot(2), 2);
  EXPECT_EQ(r1.slot(3), 3);  // head 7: group 1's first slot
  // The kernel's GQA rule, slot s reads kv head s / m, gives each head its own group.
  for (std::size_t i = 0; i < r1.heads.size(); ++i) {
    EXPECT_EQ(r1.groups[static_cast<std::size_t>(r1.slot(i) / r1.slots_per_group)], r1.heads[i] / 4);
  }
  const RankHeads none = rank_heads(layer, shape, 3);
  EXPECT_TRUE(none.heads.empty());
  EXPECT_EQ(none.slots(), 0);
}

TEST(HeadAssignment, BadAssignmentsNameTheElement) {
  const auto shape = test_model();
  auto a = contiguous_assignment(shape, 2);
  a[1][5] = 2;
  try {
    validate_assignment(a, shape, 2, "assignment");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "assignment[1][5] = 2: must be in [0, 1]");
    EXPECT_EQ(e.kind(), ErrorKind::kBadInput);
  }
  a.pop_back();
  EXPECT_THROW(validate_assignment(a, shape, 2, "assignment"), Error);

  const auto path = (std::filesystem::temp_directory_path() / "prefill_assignment_test.json").string();
  auto read_error = [&](const std::string& text) {
    std::ofstream(path) << text;
    try {
      read_assignment_file(path, shape, 2);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  std::ofstream(path) << "[[0,0,0,0,1,1,1,1],[1,1,1,1,0,0,0,0]]";
  EXPECT_EQ(read_assignment_file(path, shape, 2)[1][0], 1);
  EXPECT_NE(read_error("[[0,0,0,0,1,1,1,1],[1,1,1,1,0,0,0,5]]").find("assignment[1][7] = 5"), std::string::npos);
  EXPECT_NE(read_error("[[0,0,0,0,1,1,1,1]]").find("2 layers"), std::string::npos);
  EXPECT_NE(read_error("[[0,0,0,0,1,1,1],[1,1,1,1,0,0,0,0]]").find("assignment[0]"), std::string::npos);
  EXPECT_NE(read_error("[[0,0,0,0,1,1,1,1.5],[1,1,1,1,0,0,0,0]]").find("assignment[0][7]"), std::string::npos);
  EXPECT_NE(read_error("not json").find(path), std::string::npos);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace fulcrum::prefill
