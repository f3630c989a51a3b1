// verify_plan: the law every compiled Plan obeys, checked by running all ranks' Programs symbolically
// in one process. Every buffer row carries a label instead of a value: which document token and field
// it holds, or which attention contributions have been added into it. The checks:
//  - well-formed: buffer indices, slice bounds, fields of every operand, launch ids, each launch waited
//    exactly once after it starts;
//  - messages: every send has one receive with the same (source, destination, tag) and byte count;
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

namespace fulcrum {

/// `batch` is the Assignment's batch the plan was compiled from (documents and token owners).
VerifyReport verify_plan(const Plan& plan, const Batch& batch);

}  // namespace fulcrum
