#include "fulcrum/report/table.hpp"

#include "fulcrum/core/error.hpp"

#include <gtest/gtest.h>

namespace fulcrum {
namespace {

TEST(Table, AlignsColumnsAndRightAlignsNumbers) {
  Table t({"planner", "imbalance"});
  t.add_row({"distca", "1.02"});
  t.add_row({"perdoc-cp", "13.5"});
  EXPECT_EQ(t.to_string(),
            "planner    imbalance\n"
            "--------------------\n"
            "distca          1.02\n"
            "perdoc-cp       13.5\n");
  EXPECT_THROW(t.add_row({"x"}), Error);
}

TEST(Table, FormatsBytesInSiUnits) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1234567), "1.23 MB");
  EXPECT_EQ(format_bytes(2.5e12), "2.50 TB");
}

}  // namespace
}  // namespace fulcrum
