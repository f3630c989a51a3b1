// verify_plan: the law every compiled Plan obeys, checked by running all ranks' Programs symbolically
// in one process. Every buffer row carries a label instead of a value: which document token and field
// it holds, or which attention contributions have been added into it. The checks:
//  - well-formed: buffer indices, slice bounds, fields of every operand, launch ids, each launch waited
//    exactly once after it starts;
//  - messages: every send has one receive with the same (source, destination, tag) and byte count;
//  - posting order (program.hpp, CommLaunch): for every ordered pair of ranks, the sender's postings to
//    the receiver and the receiver's postings from the sender are the same sequence of messages, as
//    NCCL, which pairs sends and receives by the order they are posted, needs;
//  - no deadlock: the ranks advance together, a wait proceeding only once every send it needs was
//    launched and every receive its sends need was posted (so no protocol, eager or rendezvous, hangs);
//  - data flow: nothing reads a row before it is written; every attention operand row holds exactly
//    the token and field the call expects (K/V rows only where some query can see the key);
//  - exact coverage: the attention items cover every visible (query, key) pair exactly once
//    (plan::verify_coverage on the items);
//  - outputs: every contribution (a call's O/LSE or gradient rows) reaches the output buffer row of its
//    token's owner exactly once, merged or summed there, and nothing else does.
#pragma once

#include "fulcrum/plan/program.hpp"
#include "fulcrum/plan/verify.hpp"
#include "fulcrum/workload/batch.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace fulcrum {

/// The largest plan verify_plan checks, and so the largest plan from outside (a file, bytes, Python) that
/// runs: at most 2^28 buffer rows over all programs (rows x the field's heads where the plan cuts heads;
/// the symbolic run keeps a label of about 40 bytes for each), so at most that many tokens per document;
/// at most 1024 q heads of at most 1024 values. Larger plans are reported, not checked.
inline constexpr Tokens kMaxPlanCells = Tokens{1} << 28;
inline constexpr int kMaxPlanHeads = 1024;
inline constexpr int kMaxPlanHeadDim = 1024;

/// `batch` is the Assignment's batch the plan was compiled from (documents and token owners). Any Plan,
/// however malformed (a decoded file), gets a report, never a crash or an exception.
VerifyReport verify_plan(const Plan& plan, const Batch& batch);

/// verify_plan's posting-order check on its own (program.hpp, CommLaunch): one error per ordered pair of
/// ranks (s, d) whose postings differ, naming both ranks, the first posting where they part, its launch
/// on each side and the tags it carries. Empty when the order holds. Any Plan, however malformed.
std::vector<std::string> posting_order_errors(const Plan& plan);

/// The batch a plan carries: its documents, and as segments the rows each program owns.
Batch plan_batch(const Plan& plan);
/// verify_plan against the plan's own documents and owners (plan_batch): for a plan that arrives without
/// its Assignment. Everything but the batch's origin is checked.
VerifyReport verify_plan(const Plan& plan);
/// The gate for plans from outside: throws a bad-input Error "WHAT: fails verify_plan, so it is not run:
/// N problem(s): ..." unless verify_plan(plan) passes. The simulator and the executors run only plans
/// that pass (compiled plans do by construction; their tests verify them).
void require_valid_plan(const Plan& plan, std::string_view what = "plan");

}  // namespace fulcrum
