#include "fulcrum/sim/layer.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/cost/model_cost.hpp"
#include "fulcrum/plan/compile.hpp"
#include "fulcrum/sim/layer_chain.hpp"
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

// Per rank, the longest of `steady` over the ranks it is coupled to: those it exchanges data with,
// directly or through others (connected components of the transfers, a broadcast joining its sender to
// every rank).
std::vector<double> coupled_period_s(const Assignment& assignment, const std::vector<double>& steady) {
  const auto n = steady.size();
  std::vector<std::size_t> root(n);
  for (std::size_t r = 0; r < n; ++r) root[r] = r;
  auto find = [&](std::size_t r) {
    while (root[r] != r) r = root[r] = root[root[r]];
    return r;
  };
  auto join = [&](std::size_t a, std::size_t b) { root[find(a)] = find(b); };
  for (const Transfer& t : assignment.transfers) {
    const auto src = static_cast<std::size_t>(t.src);
    if (!t.broadcast()) {
      join(src, static_cast<std::size_t>(t.dst));
      continue;
    }
    for (std::size_t r = 0; r < n; ++r) join(src, r);
  }
  std::vector<double> longest(n, 0.0), period(n);
  for (std::size_t r = 0; r < n; ++r) longest[find(r)] = std::max(longest[find(r)], steady[r]);
  for (std::size_t r = 0; r < n; ++r) period[r] = longest[find(r)];
  return period;
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

namespace {

// The forward attention calls behind `rank`'s backward calls: what recomputing its core attention costs.
double recomputed_attention_s(const Plan& backward, int rank, const HardwareModel& group) {
  double seconds = 0;
  for (const auto& in : backward.programs[rank].instructions) {
    if (const auto* b = std::get_if<AttentionBackward>(&in.op))
      seconds += attention_call_s(backward, b->items, group, false);
  }
  return seconds;
}

}  // namespace

double layer_estimator_s(const Assignment& assignment, const LayerSetup& setup, int rank) {
  if (!setup.dynamic_mask) return 0;
  const double window = static_cast<double>(setup.dynamic_mask->options().window);
  const double q_heads = setup.model.q_heads, head_dim = setup.model.head_dim;
  double seconds = 0;
  for (const auto& s : assignment.batch.segments) {
    if (s.rank != rank || !sparse::estimates(*setup.dynamic_mask, assignment.batch.documents[s.doc].length)) continue;
    const Tokens keys = s.tokens.size();
    const double k = static_cast<double>(keys);
    const double logits_flops = 2 * window * k * head_dim * q_heads;
    constexpr double kPasses = 3, kFloatBytes = 4;
    seconds += setup.group.attention_forward_s(static_cast<Tokens>(window), keys, logits_flops) +
               setup.group.copy_s(kPasses * kFloatBytes * window * k * q_heads) +
               setup.group.overheads.attention_call_s(1, false);
  }
  return seconds;
}

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
  const Plan plan = compile(assignment, head_layout(setup.model, setup.model.dtype_bytes), pass, setup.mode);
  std::vector<double> linear(static_cast<std::size_t>(ranks), 0);
  for (int r = 0; r < ranks; ++r) {
    if (active.empty() || active[r]) {  // ranks that only serve attention do no matrix work
      linear[r] = forward ? layer_linear_forward_s(setup, t.tokens[r]) : layer_linear_backward_s(setup, t.tokens[r]);
      if (!forward && setup.recompute == Recompute::kFull) linear[r] += layer_linear_forward_s(setup, t.tokens[r]);
      if (forward) linear[r] += layer_estimator_s(assignment, setup, r);  // before the attention it guides
    }
    if (!forward && setup.recompute != Recompute::kNone) linear[r] += recomputed_attention_s(plan, r, setup.group);
  }
  // Ping-pong's halves of the matrix work around the nano-batches' traffic, chained across layers. A ring
  // plan's steps are its own overlap (each hop beside a step's compute); its attention runs after the
  // projections in any mode, as ring attention runs, so it is never split (that made zigzag look 19% faster
  // in ping-pong mode, a schedule no ring implementation has).
  const bool split = setup.mode == CommMode::kPingPong && assignment.ring_node_ranks == 0;
  t.timeline = simulate_plan(plan, setup.group, layer_matrix_work(plan, linear, split));
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
  for (std::size_t r = 0; r < t.end_s.size(); ++r) {
    t.second_end_s.push_back(2 * t.end_s[r]);
    t.second_exposed_s.push_back(2 * t.exposed_comm_s[r]);
  }
  t.steady_layer_s = t.end_s;
  t.period_s = t.end_s;
  t.steady_exposed_s = t.exposed_comm_s;
  t.second_makespan_s = 2 * t.makespan_s();
  t.steady_makespan_s = t.makespan_s();
  if (setup.whole_layer && split) {
    const LayerChain two = chain_layers(plan, linear, split, 2), three = chain_layers(plan, linear, split, 3);
    const SimResult second = simulate_plan(two.plan, setup.group, two.options);
    const SimResult third = simulate_plan(three.plan, setup.group, three.options);
    for (int r = 0; r < ranks; ++r) {
      const auto &s2 = second.ranks[r].summary, &s3 = third.ranks[r].summary;
      t.second_end_s[r] = s2.total_s;
      t.steady_layer_s[r] = s3.total_s - s2.total_s;
      t.second_exposed_s[r] = s2.exposed_comm_s;
      t.steady_exposed_s[r] = s3.exposed_comm_s - s2.exposed_comm_s;
    }
    t.second_makespan_s = second.makespan_s;
    t.steady_makespan_s = third.makespan_s - second.makespan_s;
    t.period_s = coupled_period_s(assignment, t.steady_layer_s);
  }
  return t;
}

}  // namespace fulcrum::sim
