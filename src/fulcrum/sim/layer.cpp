#include "fulcrum/sim/layer.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/cost/model_cost.hpp"
#include "fulcrum/plan/compile.hpp"
#include "fulcrum/sim/parallel.hpp"

#include <algorithm>

namespace fulcrum::sim {

namespace {

// Megatron-LM's tensor parallelism all-reduces the layer's activations twice per pass (after the
// attention block and after the MLP): tokens x hidden values each.
double tp_comm_s(const LayerSetup& setup, Tokens tokens) {
  const double bytes = static_cast<double>(tokens) * setup.model.hidden * setup.model.dtype_bytes;
  return 2.0 * tp_allreduce_s(setup.gpu, setup.tp, bytes);
}

double workspace_bytes(const Plan& plan, int rank) {
  double bytes = 0;
  for (const auto& b : plan.programs[rank].buffers) {
    if (!b.output && b.init != BufferInit::kInput) bytes += static_cast<double>(b.rows * plan.heads.row_bytes(b.field));
  }
  return bytes;
}

// Where a rank's matrix work runs on its compute stream. Single-stream: all of it before the Program.
// Ping-pong: each nano-batch's half, the second after nano-batch 0's dispatch is launched, so nano-batch
// 1's matrix work hides nano-batch 0's traffic, as DistCA's ping-pong does (in the running model, the
// second half is nano-batch 1's MLP of the previous layer and QKV projection of this one).
std::vector<SimOptions::ExtraCompute> matrix_work(const Program& program, double seconds, CommMode schedule) {
  if (schedule == CommMode::kPingPong) {
    for (std::size_t i = 0; i < program.instructions.size(); ++i) {
      const Instruction& in = program.instructions[i];
      if (in.stream == 1 && std::holds_alternative<CommLaunch>(in.op)) return {{0, seconds / 2}, {i, seconds / 2}};
    }
  }
  return {{0, seconds}};
}

}  // namespace

double layer_linear_forward_s(const LayerSetup& setup, Tokens tokens) {
  const double flops = linear_forward_flops_per_token(setup.model) * static_cast<double>(tokens);
  return setup.group.linear_s(flops) + tp_comm_s(setup, tokens);
}

double layer_linear_backward_s(const LayerSetup& setup, Tokens tokens) {
  const double flops = 2.0 * linear_forward_flops_per_token(setup.model) * static_cast<double>(tokens);
  return setup.group.linear_s(flops) + tp_comm_s(setup, tokens);
}

double PassTimes::makespan_s() const { return end_s.empty() ? 0 : *std::max_element(end_s.begin(), end_s.end()); }

PassTimes simulate_pass(const Assignment& assignment, const LayerSetup& setup, Pass pass,
                        const std::vector<bool>& active) {
  const int ranks = assignment.batch.ranks;
  if (!active.empty() && static_cast<int>(active.size()) != ranks) {
    fail("active has {} flags: must be empty or one per rank ({})", active.size(), ranks);
  }
  PassTimes t;
  t.tokens.assign(static_cast<std::size_t>(ranks), 0);
  for (const auto& s : assignment.batch.segments) t.tokens[s.rank] += s.tokens.size();

  const bool forward = pass == Pass::kForward;
  SimOptions options;
  const Plan plan = compile(assignment, head_layout(setup.model, setup.model.dtype_bytes), pass, setup.mode);
  std::vector<double> linear(static_cast<std::size_t>(ranks), 0);
  for (int r = 0; r < ranks; ++r) {
    if (active.empty() || active[r]) {  // ranks that only serve attention do no matrix work
      linear[r] = forward ? layer_linear_forward_s(setup, t.tokens[r]) : layer_linear_backward_s(setup, t.tokens[r]);
    }
    options.extra_compute.push_back(matrix_work(plan.programs[r], linear[r], setup.mode));
  }
  t.timeline = simulate_plan(plan, setup.group, options);
  t.step_flops = plan_steps(plan, 0).flops;
  t.step_attention_s.assign(t.step_flops.size(), std::vector<double>(t.step_flops.front().size(), 0));
  for (int r = 0; r < ranks; ++r) {
    for (const auto& e : t.timeline.ranks[r].events) {
      if (e.track == runtime::Track::kCompute && e.flops > 0) t.step_attention_s[r][e.stream] += e.end_s - e.start_s;
    }
  }
  for (int r = 0; r < ranks; ++r) {
    const auto& s = t.timeline.ranks[r].summary;
    t.end_s.push_back(s.total_s);
    t.linear_s.push_back(linear[r]);
    t.attention_s.push_back(s.attention_s);
    t.other_s.push_back(s.other_compute_s - linear[r]);
    t.exposed_comm_s.push_back(s.exposed_comm_s);
    t.peer_wait_s.push_back(s.peer_wait_s);
    t.bytes_sent.push_back(s.bytes_sent);
    t.workspace_bytes.push_back(workspace_bytes(plan, r));
  }
  return t;
}

}  // namespace fulcrum::sim
