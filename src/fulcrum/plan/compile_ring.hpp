// compile for ring Assignments (Assignment::ring_node_ranks > 0): context-parallel ring attention, flat
// or hierarchical (an inner ring over a machine's ranks while the outer, inter-machine transfer is in
// flight), forward and backward, as ordered per-rank Programs. compile() calls it; the schedule is
// described in compile_ring.cpp.
//
// Requirements on the Assignment (internal errors when a planner breaks them): every task covers all
// heads, its server holds its query rows, and one rank holds all of its keys. The ranks must fill whole
// machines of ring_node_ranks (bad input otherwise).
#pragma once

#include "fulcrum/plan/assignment.hpp"
#include "fulcrum/plan/program.hpp"

namespace fulcrum {

/// The ring Programs of `assignment`; the Plan's nano-batches are the ring's steps (one per rank).
Plan compile_ring(const Assignment& assignment, const HeadLayout& heads, Pass pass, CommMode mode);

}  // namespace fulcrum
