// What every GoogleTest binary run under mpiexec does around its tests: only rank 0 prints GoogleTest's
// results (other ranks may add a printer of their own failures), and the verdict is combined over all
// ranks, so a failure on any rank fails the binary everywhere. Header-only: it belongs to the tests.
#pragma once

#include "fulcrum/runtime/mpi_communicator.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <span>
#include <vector>

namespace fulcrum::runtime::testing {

/// On ranks other than 0: drops GoogleTest's default printer, and installs `printer` if one is given.
inline void quiet_other_ranks(int world_rank, ::testing::TestEventListener* printer = nullptr) {
  if (world_rank == 0) return;
  auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
  delete listeners.Release(listeners.default_result_printer());
  if (printer) listeners.Append(printer);
}

/// RUN_ALL_TESTS on this rank, then 1 on every rank if it failed on any rank, else 0.
inline int run_all_tests_on_every_rank(Communicator& verdict) {
  const double failed = RUN_ALL_TESTS() == 0 ? 0.0 : 1.0;
  const std::vector<double> all = verdict.all_gather(std::span(&failed, 1));
  return std::any_of(all.begin(), all.end(), [](double f) { return f != 0.0; }) ? 1 : 0;
}

}  // namespace fulcrum::runtime::testing
