#include "fulcrum/sim/engine.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/plan/compile.hpp"
#include "fulcrum/plan/plan_test_cases.hpp"
#include "fulcrum/plan/program_verify.hpp"
#include "fulcrum/plan/serialize.hpp"
#include "fulcrum/planners/planner.hpp"
#include "fulcrum/workload/model_shape.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

namespace fulcrum::sim {
namespace {

// One head of dimension 1 in fp32: a Q row is 4 bytes, a document pair costs 4 FLOPs.
const HeadLayout kTinyHeads{1, 1, 1, 4};

HardwareModel flat_hardware(double bandwidth, double latency, double flops_per_s, int per_node = 8) {
  HardwareModel hw;
  hw.name = "test";
  hw.devices_per_node = per_node;
  hw.peak_flops = flops_per_s;
  hw.memory_bytes = 1e12;
  hw.memory_bandwidth = 1e18;  // copies are free unless a test says otherwise
  hw.intra_node = {bandwidth, latency};
  hw.inter_node = {bandwidth / 10, latency};
  hw.linear_mfu = 1;
  hw.attention = ProfileTable::from_peak(flops_per_s);
  return hw;
}

Program program_with_buffer(int rank, Tokens rows) {
  Program p;
  p.rank = rank;
  p.buffers.push_back({"x", Field::kQ, rows, BufferInit::kInput, false});
  return p;
}

// Ranks 0 and 1 each send 4000 bytes to rank 2 at time 0: they share rank 2's ingress port, so each
// moves at half the bandwidth and both arrive at latency + 2 * 4000 / bandwidth.
TEST(SimEngine, TwoTransfersIntoOneRankShareItsPort) {
  Plan plan;
  plan.heads = kTinyHeads;
  for (int r = 0; r < 3; ++r) plan.programs.push_back(program_with_buffer(r, 2000));
  for (int src = 0; src < 2; ++src) {
    plan.programs[src].instructions = {{CommLaunch{0, {{2, 0, {0, 0, 1000}}}, {}}, 0}, {CommWait{0}, 0}};
  }
  plan.programs[2].instructions = {{CommLaunch{0, {}, {{0, 0, {0, 0, 1000}}, {1, 0, {0, 1000, 1000}}}}, 0},
                                   {CommWait{0}, 0}};
  const auto result = simulate_plan(plan, flat_hardware(1000, 0.5, 1e9));
  EXPECT_NEAR(result.makespan_s, 0.5 + 8.0, 1e-9);
  for (int r = 0; r < 3; ++r) EXPECT_NEAR(result.ranks[r].summary.total_s, 8.5, 1e-9) << r;
  // Alone, one transfer takes half as long.
  plan.programs[1].instructions.clear();
  plan.programs[2].instructions = {{CommLaunch{0, {}, {{0, 0, {0, 0, 1000}}}}, 0}, {CommWait{0}, 0}};
  EXPECT_NEAR(simulate_plan(plan, flat_hardware(1000, 0.5, 1e9)).makespan_s, 4.5, 1e-9);
}

// Rank 0 starts a 4-second transfer, computes 3 seconds of attention, then waits: 1 second exposed.
TEST(SimEngine, ComputeOverlapsATransfer) {
  Plan plan;
  plan.heads = kTinyHeads;
  plan.documents = {{50, MaskSpec::full()}};  // 2500 pairs = 10000 FLOPs
  plan.programs = {program_with_buffer(0, 1000), program_with_buffer(1, 1000)};
  auto& p0 = plan.programs[0];
  p0.buffers.push_back({"k", Field::kK, 50, BufferInit::kInput, false});
  p0.buffers.push_back({"v", Field::kV, 50, BufferInit::kInput, false});
  p0.buffers.push_back({"o", Field::kO, 50, BufferInit::kZero, true});
  p0.buffers.push_back({"lse", Field::kLse, 50, BufferInit::kNegInf, true});
  const AttentionItem item{0, {RowSpan{0, 0, 50}, RowSpan{}}, RowSpan{0, 0, 50}};
  p0.instructions = {
      {CommLaunch{0, {{1, 0, {0, 0, 1000}}}, {}}, 0}, {Attention{0, 1, 2, 3, 4, {item}}, 0}, {CommWait{0}, 0}};
  plan.programs[1].instructions = {{CommLaunch{0, {}, {{0, 0, {0, 0, 1000}}}}, 0}, {CommWait{0}, 0}};
  const auto result = simulate_plan(plan, flat_hardware(1000, 0, 10000.0 / 3.0));
  const auto& s = result.ranks[0].summary;
  EXPECT_NEAR(s.attention_s, 3.0, 1e-9);
  EXPECT_NEAR(s.total_s, 4.0, 1e-9);
  EXPECT_NEAR(s.exposed_comm_s, 1.0, 1e-9);
  EXPECT_NEAR(s.comm_s, 4.0, 1e-9);
  EXPECT_NEAR(result.ranks[1].summary.exposed_comm_s, 4.0, 1e-9);
}

// Two ranks sharing one compute slot (cpu-local's oversubscription): 1 s and 3 s of work run at half
// speed together until the short one ends at 2 s, then the long one alone at full speed until 4 s.
TEST(SimEngine, RanksSharingComputeSlotsRunAtTheirShare) {
  Plan plan;
  plan.heads = kTinyHeads;
  for (int r = 0; r < 2; ++r) {
    plan.programs.push_back(program_with_buffer(r, 6000));
    const Tokens rows = r == 0 ? 1000 : 3000;
    plan.programs[r].instructions = {{Copy{{0, 0, rows}, {0, rows, rows}}, 0}};
  }
  auto hw = flat_hardware(1000, 0, 1e9, 2);
  hw.memory_bandwidth = 8000;  // a copy of 1000 rows moves 8000 bytes: 1 s
  hw.compute_slots_per_node = 1;
  const auto shared = simulate_plan(plan, hw);
  EXPECT_NEAR(shared.ranks[0].summary.total_s, 2.0, 1e-9);
  EXPECT_NEAR(shared.ranks[1].summary.total_s, 4.0, 1e-9);
  EXPECT_NEAR(shared.ranks[1].summary.other_compute_s, 4.0, 1e-9);
  hw.compute_slots_per_node = 0;  // each its own device
  EXPECT_NEAR(simulate_plan(plan, hw).makespan_s, 3.0, 1e-9);
}

// A flow's share changes while it moves: rank 0's 4000 bytes to rank 2 run alone at 1000 B/s for 1 s;
// then rank 1 (busy 1 s) sends 1000 bytes to rank 2 too, and both move at 500 B/s until rank 1's
// arrives at 3 s; rank 0's last 2000 bytes then take 2 s alone: it arrives at 5 s.
TEST(SimEngine, AFlowsShareChangesWhenAnotherJoinsItsPort) {
  Plan plan;
  plan.heads = kTinyHeads;
  for (int r = 0; r < 3; ++r) plan.programs.push_back(program_with_buffer(r, 2000));
  plan.programs[0].instructions = {{CommLaunch{0, {{2, 0, {0, 0, 1000}}}, {}}, 0}, {CommWait{0}, 0}};
  plan.programs[1].instructions = {{Copy{{0, 0, 1000}, {0, 1000, 1000}}, 0},  // 8000 bytes: 1 s
                                   {CommLaunch{0, {{2, 0, {0, 0, 250}}}, {}}, 0},
                                   {CommWait{0}, 0}};
  plan.programs[2].instructions = {{CommLaunch{0, {}, {{0, 0, {0, 0, 1000}}}}, 0},
                                   {CommLaunch{1, {}, {{1, 0, {0, 1000, 250}}}}, 0},
                                   {CommWait{0}, 0},
                                   {CommWait{1}, 0}};
  auto hw = flat_hardware(1000, 0, 1e9);
  hw.memory_bandwidth = 8000;
  const auto result = simulate_plan(plan, hw);
  EXPECT_NEAR(result.ranks[1].summary.total_s, 3.0, 1e-9);
  EXPECT_NEAR(result.ranks[0].summary.total_s, 5.0, 1e-9);
  EXPECT_NEAR(result.ranks[2].summary.total_s, 5.0, 1e-9);
}

// The event loop looks only at the ranks an event concerns: 1024 ranks in pairs, each pair exchanging
// a different size (so every arrival is its own event), cost one look per rank, compute end and answered
// wait. Looking at every rank at every event would cost about 512 x 1024.
TEST(SimEngine, TheEventLoopTouchesOnlyTheRanksAnEventConcerns) {
  constexpr int kRanks = 1024;
  Plan plan;
  plan.heads = kTinyHeads;
  for (int r = 0; r < kRanks; ++r) {
    plan.programs.push_back(program_with_buffer(r, 2 * kRanks));
    const int peer = r ^ 1;
    const Slice rows{0, 0, 1 + r / 2};
    plan.programs[r].instructions = {{CommLaunch{0, {{peer, 0, rows}}, {{peer, 0, {0, kRanks, 1 + r / 2}}}}, 0},
                                     {CommWait{0}, 0}};
  }
  const auto result = simulate_plan(plan, flat_hardware(1000, 0, 1e9, 2));
  // Per pair, its exchange ends at (1 + pair) x 4 bytes / 1000 B/s.
  for (int r = 0; r < kRanks; ++r) EXPECT_NEAR(result.ranks[r].summary.total_s, (1 + r / 2) * 0.004, 1e-12) << r;
  EXPECT_LE(result.rank_visits, 2u * kRanks);  // the start, and the answered wait
}

// Incast at a few hundred ranks: ranks 1..299 each send rank 0 a different size at time 0. Their flows
// share rank 0's ingress port fairly, so the transfers finish smallest first, and while k remain each
// moves at bandwidth / k (processor sharing). The reference computes those finish times in fp64 directly;
// every arrival changes every other flow's rate, which the engine brings up to date lazily.
TEST(SimEngine, IncastAtHundredsOfRanksSharesTheIngressPortFairly) {
  constexpr int kSenders = 299;
  constexpr double kBandwidth = 1000;  // bytes/s; a row is 4 bytes
  Plan plan;
  plan.heads = kTinyHeads;
  plan.programs.push_back(program_with_buffer(0, Tokens{kSenders} * (kSenders + 1) / 2));
  std::vector<Message> receives;
  for (int r = 1; r <= kSenders; ++r) {
    plan.programs.push_back(program_with_buffer(r, r));
    plan.programs[r].instructions = {{CommLaunch{0, {{0, 0, {0, 0, r}}}, {}}, 0}, {CommWait{0}, 0}};
    receives.push_back({r, 0, {0, Tokens{r - 1} * r / 2, r}});  // rows of sender r after those of 1..r-1
  }
  plan.programs[0].instructions = {{CommLaunch{0, {}, receives}, 0}, {CommWait{0}, 0}};
  const auto result = simulate_plan(plan, flat_hardware(kBandwidth, 0, 1e9, kSenders + 1));
  double t = 0;
  for (int r = 1; r <= kSenders; ++r) {
    // The flow of r moves its last 4 bytes (beyond r - 1's) while kSenders - r + 1 flows remain.
    t += 4.0 * (kSenders - r + 1) / kBandwidth;
    EXPECT_NEAR(result.ranks[r].summary.total_s, t, 1e-9 * t) << "sender " << r;
  }
  EXPECT_NEAR(result.ranks[0].summary.total_s, t, 1e-9 * t);
  EXPECT_NEAR(result.makespan_s, t, 1e-9 * t);
}

// Work before the program (the layer's matrix work) delays the send: rank 0 computes 2 s, then
// its 4-second transfer to rank 1 runs; rank 1, busy 1 s, waits for it until 6 s.
TEST(SimEngine, WorkBeforeTheProgramDelaysItsTraffic) {
  Plan plan;
  plan.heads = kTinyHeads;
  plan.programs = {program_with_buffer(0, 1000), program_with_buffer(1, 1000)};
  plan.programs[0].instructions = {{CommLaunch{0, {{1, 0, {0, 0, 1000}}}, {}}, 0}, {CommWait{0}, 0}};
  plan.programs[1].instructions = {{CommLaunch{0, {}, {{0, 0, {0, 0, 1000}}}}, 0}, {CommWait{0}, 0}};
  SimOptions options;
  options.extra_compute = {{{0, 2.0}}, {{0, 1.0}}};
  const auto result = simulate_plan(plan, flat_hardware(1000, 0, 1e9), options);
  EXPECT_NEAR(result.makespan_s, 6.0, 1e-9);
  EXPECT_NEAR(result.ranks[1].summary.other_compute_s, 1.0, 1e-9);
  EXPECT_NEAR(result.ranks[1].summary.peer_wait_s, 1.0, 1e-9);
  EXPECT_NEAR(result.ranks[1].summary.exposed_comm_s, 4.0, 1e-9);
  options.extra_compute = {{{0, 1.0}}, {{0, 1.0}}, {{0, 1.0}}};
  EXPECT_THROW(simulate_plan(plan, flat_hardware(1000, 0, 1e9), options), Error);
  options.extra_compute = {{{1, 1.0}, {0, 1.0}}};
  EXPECT_THROW(simulate_plan(plan, flat_hardware(1000, 0, 1e9), options), Error);
  // Work placed after the launch overlaps the transfer: rank 0 launches at 0, then computes 3 s while
  // its 4-second transfer runs; rank 1 receives at 4; after the program rank 1 computes 1 s more.
  options.extra_compute = {{{1, 3.0}}, {{2, 1.0}}};
  const auto overlapped = simulate_plan(plan, flat_hardware(1000, 0, 1e9), options);
  EXPECT_NEAR(overlapped.ranks[0].summary.total_s, 4.0, 1e-9);
  EXPECT_NEAR(overlapped.ranks[0].summary.exposed_comm_s, 1.0, 1e-9);
  EXPECT_NEAR(overlapped.ranks[1].summary.total_s, 5.0, 1e-9);
}

TEST(SimEngine, ADeadlockIsAnErrorNotAHang) {
  Plan plan;
  plan.heads = kTinyHeads;
  plan.programs = {program_with_buffer(0, 10), program_with_buffer(1, 10)};
  // Both ranks wait for a receive before launching the send the other waits for.
  for (int r = 0; r < 2; ++r) {
    plan.programs[r].instructions = {{CommLaunch{0, {}, {{1 - r, 0, {0, 0, 5}}}}, 0},
                                     {CommWait{0}, 0},
                                     {CommLaunch{1, {{1 - r, 0, {0, 5, 5}}}, {}}, 0},
                                     {CommWait{1}, 0}};
  }
  EXPECT_THROW(simulate_plan(plan, flat_hardware(1000, 0, 1e9)), Error);
}

// Compiled plans of random assignments: more bandwidth never makes a pass slower. (Identical timelines
// for the same plan at any thread count: thread_determinism_test.cpp.)
TEST(SimEngine, MonotoneInBandwidth) {
  const HeadLayout heads{4, 2, 16, 4};
  for (std::uint64_t seed = 0; seed < 60; ++seed) {
    const Assignment a = testing::random_assignment(seed, MaskSpec::causal(), 4);
    for (Pass pass : {Pass::kForward, Pass::kBackward}) {
      const Plan plan = compile(a, heads, pass, seed % 2 ? CommMode::kPingPong : CommMode::kSingleStream);
      const auto first = simulate_plan(plan, flat_hardware(1e6, 1e-5, 1e9, 2));
      double previous = first.makespan_s;
      for (double bw : {2e6, 4e6, 1e8}) {
        const double t = simulate_plan(plan, flat_hardware(bw, 1e-5, 1e9, 2)).makespan_s;
        EXPECT_LE(t, previous * (1 + 1e-12)) << "seed " << seed << " bandwidth " << bw;
        previous = t;
      }
    }
  }
}

// Head-sliced messages move only their heads in virtual time too: the simulated ranks send what the
// plan's messages carry, less than whole rows.
TEST(SimEngine, HeadSlicedMessagesCountOnlyTheirHeads) {
  const HeadLayout gqa{8, 2, 16, 4};
  for (int split : {4, 3}) {
    const Assignment a = testing::gqa_head_split_assignment(3, split);
    for (Pass pass : {Pass::kForward, Pass::kBackward}) {
      const Plan plan = compile(a, gqa, pass, CommMode::kPingPong);
      const auto result = simulate_plan(plan, flat_hardware(1e6, 1e-5, 1e9, 2));
      double sent = 0, received = 0;
      for (const auto& r : result.ranks) {
        sent += r.summary.bytes_sent;
        received += r.summary.bytes_received;
      }
      EXPECT_DOUBLE_EQ(sent, testing::message_bytes(plan));
      EXPECT_DOUBLE_EQ(received, sent);
      EXPECT_LT(sent, testing::message_bytes(plan, true)) << "split " << split;
    }
  }
}

// Plans from outside run only once they pass verify_plan (require_valid_plan at the entry points), and then
// they must simulate: every single-byte change of a compiled plan's binary form that still decodes and
// verifies simulates to a finite makespan without an error (fuzz/plan_binary_fuzz explores further).
// The ring baseline as ring-flash-attention and TransformerEngine's CP run it: the K/V block for the next step
// travels while the current step computes (double buffering). With free compute a layer takes its hops one
// after another, (ranks - 1) x one hop; with free communication, the busiest rank's attention calls; with
// both, less than their sum.
TEST(SimEngine, RingOverlapsEachHopWithTheStepsCompute) {
  PlannerOptions options;
  options.model = model_shape_preset("llama3-8b");
  constexpr int kRanks = 4;
  constexpr Tokens kTokens = 4096;
  const Batch batch = pack_batch({{0, kRanks * kTokens, MaskSpec::full()}}, kRanks, kTokens);
  const Assignment a = plan_verified(*make_planner("ring", options), batch);
  const Plan plan = compile(a, head_layout(options.model, 2), Pass::kForward, CommMode::kSingleStream);
  constexpr double kBandwidth = 1e11, kLatency = 1e-5, kFlops = 1e14, kFree = 1e30;

  const HardwareModel no_comm = flat_hardware(kFree, 0, kFlops, 1);
  double busiest = 0;
  for (const auto& p : plan.programs) {
    double calls = 0;
    for (const auto& in : p.instructions) {
      if (const auto* call = std::get_if<Attention>(&in.op))
        calls += attention_call_s(plan, call->items, no_comm, false);
    }
    busiest = std::max(busiest, calls);
  }
  const double compute = simulate_plan(plan, no_comm).makespan_s;
  EXPECT_NEAR(compute, busiest, 1e-6 * busiest);  // merges and copies at 1e18 B/s: not quite free

  double hop_bytes = 0;  // rank 0's first launch: its K/V block to its ring neighbour
  for (const auto& in : plan.programs[0].instructions) {
    if (const auto* launch = std::get_if<CommLaunch>(&in.op)) {
      for (const auto& m : launch->sends) {
        hop_bytes += static_cast<double>(plan.heads.bytes(plan.programs[0].buffers[m.slice.buffer].field, m.slice));
      }
      break;
    }
  }
  ASSERT_GT(hop_bytes, 0);
  const HardwareModel no_compute = flat_hardware(kBandwidth, kLatency, kFree, 1);  // every rank its own node
  const double hop_s = no_compute.inter_node.transfer_s(hop_bytes);
  const double comm = simulate_plan(plan, no_compute).makespan_s;
  EXPECT_NEAR(comm, (kRanks - 1) * hop_s, 1e-6 * comm);

  const double both = simulate_plan(plan, flat_hardware(kBandwidth, kLatency, kFlops, 1)).makespan_s;
  EXPECT_GE(both, std::max(compute, comm) * (1 - 1e-9));
  EXPECT_LT(both, 0.8 * (compute + comm)) << "compute " << compute << " s, communication " << comm << " s";
}

// A launch-bound batch (many one-tile documents on one rank): every attention call pays the hardware's fixed
// cost per call and per item, every copy and reduction the forward per-call cost, so the predicted time
// rises by exactly their sum over the rank's calls as the fields grow.
TEST(SimEngine, ALaunchBoundBatchPaysTheFixedCostsOfEveryCall) {
  PlannerOptions options;
  options.model = model_shape_preset("tiny");
  std::vector<Document> documents;
  for (int d = 0; d < 64; ++d) documents.push_back({d, 16, MaskSpec::causal()});
  const Batch batch = pack_batch(documents, 1, 64 * 16);
  const Assignment a = plan_verified(*make_planner("packed", options), batch);
  for (Pass pass : {Pass::kForward, Pass::kBackward}) {
    const Plan plan = compile(a, head_layout(options.model, 2), pass, CommMode::kSingleStream);
    HardwareModel hw = flat_hardware(1e10, 1e-6, 1e12, 1);
    const double base = simulate_plan(plan, hw).makespan_s;
    double calls = 0, items = 0;
    for (const auto& in : plan.programs[0].instructions) {
      if (const auto* f = std::get_if<Attention>(&in.op)) {
        ++calls;
        items += static_cast<double>(f->items.size());
      } else if (const auto* b = std::get_if<AttentionBackward>(&in.op)) {
        ++calls;
        items += static_cast<double>(b->items.size());
      }
    }
    ASSERT_GE(items, 64) << to_string(pass);
    double previous = base;
    for (double scale : {1.0, 2.0, 4.0}) {
      hw.overheads = {5e-6 * scale, 1e-6 * scale, 5e-6 * scale, 1e-6 * scale};
      const double t = simulate_plan(plan, hw).makespan_s;
      double copies = 0;  // copies and reductions: the forward call cost
      for (const auto& in : plan.programs[0].instructions) {
        copies += std::holds_alternative<Copy>(in.op) || std::holds_alternative<Reduce>(in.op);
      }
      EXPECT_NEAR(t - base, (calls + copies) * 5e-6 * scale + items * 1e-6 * scale, 1e-12) << to_string(pass);
      EXPECT_GT(t, previous);
      previous = t;
    }
  }
}

TEST(SimEngine, EveryCorruptPlanThatVerifiesSimulates) {
  Assignment a;
  a.batch = pack_batch({{0, 8, MaskSpec::causal()}, {1, 6, MaskSpec::causal()}}, 2, 7);
  a.tasks = {{0, {Range{4, 8}, Range{}}, {0, 4}, 0},
             {0, {Range{4, 8}, Range{}}, {4, 8}, 1},
             {0, {Range{0, 4}, Range{}}, {0, 4}, 1},
             {1, {Range{0, 6}, Range{}}, {0, 6}, 0}};
  a.transfers = minimal_transfers(a.batch, a.tasks);
  const HardwareModel hw = flat_hardware(1e9, 1e-6, 1e12, 1);  // one device per node: every message crosses nodes
  int verified = 0;
  for (Pass pass : {Pass::kForward, Pass::kBackward}) {
    const auto bytes = to_binary(compile(a, HeadLayout{2, 1, 8, 4}, pass, CommMode::kPingPong));
    for (std::size_t i = 0; i < bytes.size(); ++i) {
      for (std::uint8_t flip : {std::uint8_t{0x01}, std::uint8_t{0x10}, std::uint8_t{0x80}}) {
        auto corrupt = bytes;
        corrupt[i] ^= flip;
        Plan plan;
        try {
          plan = plan_from_binary(corrupt);
        } catch (const Error& e) {
          ASSERT_EQ(e.kind(), ErrorKind::kBadInput) << e.what();
          continue;
        }
        if (!verify_plan(plan).ok()) {
          EXPECT_THROW(require_valid_plan(plan), Error);
          continue;
        }
        ++verified;
        const SimResult result = simulate_plan(plan, hw);
        EXPECT_TRUE(std::isfinite(result.makespan_s) && result.makespan_s > 0) << "byte " << i;
      }
    }
  }
  EXPECT_GT(verified, 0);  // some changes keep the plan valid (a tag, a buffer's name): the loop tested something
}

}  // namespace
}  // namespace fulcrum::sim
