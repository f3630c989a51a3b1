#include "fulcrum/sim/iteration.hpp"

#include "fulcrum/cost/model_cost.hpp"
#include "fulcrum/sim/pipeline.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

namespace fulcrum::sim {
namespace {

StepMatrix add_steps(StepMatrix x, const StepMatrix& y) {
  for (std::size_t r = 0; r < x.size(); ++r) {
    for (std::size_t s = 0; s < x[r].size(); ++s) x[r][s] += y[r][s];
  }
  return x;
}

void note_pass(IterationOutcome& out, const PassTimes& t, double layers) {
  for (std::size_t r = 0; r < t.end_s.size(); ++r) {
    out.bytes += layers * t.bytes_sent[r];
    out.attention_buffers = std::max(out.attention_buffers, t.workspace_bytes[r]);
  }
}

// plan_verified, its planning (not the verifier, which a training job does not run) timed into
// `out.planning_s`.
Assignment timed_plan(Planner& planner, const Batch& batch, IterationOutcome& out) {
  const auto start = std::chrono::steady_clock::now();
  Assignment a = planner.plan(batch);
  out.planning_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  check_verified(planner, a, batch);
  return a;
}

// The tick's pooled batch: every working stage's micro-batch, its dp groups' tokens on that stage's
// TP groups (rank stage x dp + d); idle stages hold nothing and only serve attention.
Batch pooled_batch(const Tick& tick, const std::vector<Batch>& microbatches, int dp, std::vector<bool>& active) {
  const int stages = static_cast<int>(tick.microbatch.size());
  Batch pooled;
  pooled.ranks = stages * dp;
  pooled.tokens_per_rank = microbatches.front().tokens_per_rank;
  active.assign(static_cast<std::size_t>(pooled.ranks), false);
  for (int s = 0; s < stages; ++s) {
    const int m = tick.microbatch[s];
    if (m < 0) continue;
    const int first_doc = static_cast<int>(pooled.documents.size());
    pooled.documents.insert(pooled.documents.end(), microbatches[m].documents.begin(), microbatches[m].documents.end());
    for (const auto& seg : microbatches[m].segments)
      pooled.segments.push_back({first_doc + seg.doc, seg.tokens, s * dp + seg.rank});
    for (int d = 0; d < dp; ++d) active[s * dp + d] = true;
  }
  return pooled;
}

}  // namespace

double batch_work(const Batch& batch, const ModelShape& model) {
  double flops = 0;
  for (const Document& d : batch.documents) flops += document_forward_flops(model, d);
  return flops;
}

IterationOutcome run_1f1b(const IterationContext& cx, Planner& planner, const std::vector<Batch>& microbatches) {
  IterationOutcome out(cx.pp * cx.dp);
  std::vector<std::vector<std::vector<StageWork>>> work(cx.dp,
                                                        std::vector<std::vector<StageWork>>(cx.pp));  // [d][s][m]
  std::vector<double> max_tokens(cx.dp, 0);
  for (int m = 0; m < cx.microbatches; ++m) {
    const Assignment a = timed_plan(planner, microbatches[m], out);
    const PassTimes f = simulate_pass(a, cx.setup, Pass::kForward);
    const PassTimes b = simulate_pass(a, cx.setup, Pass::kBackward);
    if (m == 0) {
      out.step_flops = add_steps(f.step_flops, b.step_flops);
      out.step_attention_s = add_steps(f.step_attention_s, b.step_attention_s);
    }
    note_pass(out, f, cx.pp * cx.stage_layers);
    note_pass(out, b, cx.pp * cx.stage_layers);
    out.tokens += static_cast<double>(a.batch.total_tokens());
    out.work += batch_work(a.batch, cx.setup.model);
    for (int d = 0; d < cx.dp; ++d) {
      max_tokens[d] = std::max(max_tokens[d], static_cast<double>(f.tokens[d]));
      for (int s = 0; s < cx.pp; ++s) {
        work[d][s].push_back({f.layers_end_s(d, cx.stage_layers), b.layers_end_s(d, cx.stage_layers)});
        out.slots.add(s * cx.dp + d, f, d, cx.stage_layers);
        out.slots.add(s * cx.dp + d, b, d, cx.stage_layers);
      }
    }
  }
  const double in_flight = std::min(cx.pp, cx.microbatches);  // 1F1B: stage 0 holds pp micro-batches
  for (int d = 0; d < cx.dp; ++d) {
    const PipelineResult p = simulate_1f1b(work[d], cx.pp > 1 ? cx.p2p_s : 0);
    out.iteration_s = std::max(out.iteration_s, p.iteration_s);
    out.tokens_in_flight = std::max(out.tokens_in_flight, in_flight * max_tokens[d]);
    out.microbatch_tokens = std::max(out.microbatch_tokens, max_tokens[d]);
    for (const auto& step : p.steps) {
      out.trace.push_back({step.stage * cx.dp + d, runtime::Track::kCompute, 0,
                           fmt::format("{} mb{}", step.backward ? "backward" : "forward", step.microbatch),
                           step.start_s, step.end_s, 0, 0});
    }
  }
  return out;
}

IterationOutcome run_phase_aligned(const IterationContext& cx, Planner& planner,
                                   const std::vector<Batch>& microbatches) {
  IterationOutcome out(cx.pp * cx.dp);
  double max_tokens = 0;
  for (const Batch& microbatch : microbatches) {
    out.tokens += static_cast<double>(microbatch.total_tokens());
    out.work += batch_work(microbatch, cx.setup.model);  // a pooling planner keeps its documents
    std::vector<Tokens> per_rank(cx.dp, 0);
    for (const auto& s : microbatch.segments) per_rank[s.rank] += s.tokens.size();
    max_tokens = std::max(max_tokens, static_cast<double>(*std::max_element(per_rank.begin(), per_rank.end())));
  }
  std::vector<int> in_flight(cx.pp, 0);
  int most_in_flight = 0;
  double now = 0;
  for (const Tick& tick : phase_aligned_ticks(cx.pp, cx.microbatches)) {
    std::vector<bool> active;
    const Assignment a = timed_plan(planner, pooled_batch(tick, microbatches, cx.dp, active), out);
    const PassTimes t = simulate_pass(a, cx.setup, tick.backward ? Pass::kBackward : Pass::kForward, active);
    note_pass(out, t, cx.stage_layers);
    for (int r = 0; r < cx.pp * cx.dp; ++r) {
      out.slots.add(r, t, r, cx.stage_layers);
      const int m = tick.microbatch[r / cx.dp];
      const std::string name =
          m < 0 ? "attention server" : fmt::format("{} mb{}", tick.backward ? "backward" : "forward", m);
      const double busy =
          m < 0 ? cx.stage_layers * (t.attention_s[r] + t.other_s[r]) : t.layers_end_s(r, cx.stage_layers);
      out.trace.push_back({r, runtime::Track::kCompute, 0, name, now, now + busy, 0, 0});
    }
    for (int s = 0; s < cx.pp; ++s) {
      if (tick.microbatch[s] >= 0) in_flight[s] += tick.backward ? -1 : 1;
      most_in_flight = std::max(most_in_flight, in_flight[s]);
    }
    now += t.layers_makespan_s(cx.stage_layers) + cx.p2p_s;
  }
  out.iteration_s = now;
  out.tokens_in_flight = most_in_flight * max_tokens;
  out.microbatch_tokens = max_tokens;
  return out;
}

}  // namespace fulcrum::sim
