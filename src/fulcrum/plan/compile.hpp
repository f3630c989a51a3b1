// compile: lowers an Assignment to a Plan, one Program per rank, for the forward or the backward pass.
//
// Every rank is a token owner and an attention server (DistCA's in-place servers). For each server and
// nano-batch the compiler lays out a workspace: one block of Q-side rows per task (Q, and in backward
// O, LSE and dO, fetched from the rows' owners) and one block of K/V rows per connected stretch of the
// tasks' key ranges per document (only the keys some row can see are fetched; the rest stay zero and
// are masked). Outputs go back to the owners: a row computed by one task is written in place, a row
// whose keys were split over several tasks is merged by LSE (forward) or summed (dQ); dK and dV of a
// key read on several servers are summed at the key's owner.
//
// Schedules (CommMode; `signal` is the pingpong plan whose messages carry 1 byte when run):
//  - single-stream: dispatch, wait, compute everything, return, wait. No overlap.
//  - pingpong: each server's tasks split into two nano-batches of equal work, each ordered so work that
//    needs no traffic hides the traffic of work that does:
//      launch D0, D1 | local half of nb0 | wait D0 | remote nb0 | launch R0 | wait D1 | remote nb1 |
//      launch R1 | local half of nb1 | wait R0, R1 | merge and sum.
//    A task over rows its server owns is first cut at the server's own keys, so the part over keys it
//    holds is local work too (and its result is merged with the rest at the owner).
//    When the planner sets every task's division (DCP), the divisions are the nano-batches, T of them in
//    order, in the same mechanism: nano-batch i+1's dispatch is in flight while nano-batch i computes,
//      launch D0, D1 | local 0 | wait D0 | remote 0 | launch R0 | launch D2 | local 1 | wait D1 |
//      remote 1 | launch R1 | ... | wait D(T-1) | remote T-1 | launch R(T-1) | local T-1 | wait R*.
//
// Posting order (program.hpp, CommLaunch): every message is appended at once to the sender's sends and the
// receiver's receives of the launch of one role on both sides (a nano-batch's dispatch or return; a ring
// step's launch, compile_ring.cpp), and every rank emits those launches in the schedule's one order, so for
// each rank pair both sides post the same messages in the same order by construction. Every planner's
// plans are checked for it (verify_plan; planners/planner_test.cpp).
#pragma once

#include "fulcrum/plan/assignment.hpp"
#include "fulcrum/plan/program.hpp"

#include <string_view>
#include <vector>

namespace fulcrum {

/// HeadLayout of a model shape with storage of `dtype_bytes` (4: fp32, 2: bf16).
HeadLayout head_layout(const ModelShape& model, int dtype_bytes);

/// Lowers a verified Assignment (plan::verify) to per-rank Programs.
/// The Plan records `mode` and the nano-batches it made; signal compiles as pingpong.
Plan compile(const Assignment& assignment, const HeadLayout& heads, Pass pass, CommMode mode);

}  // namespace fulcrum
