#include "fulcrum/plan/step_stats.hpp"

#include "fulcrum/cost/attention_cost.hpp"
#include "fulcrum/workload/head_masks.hpp"

#include <algorithm>
#include <numeric>

namespace fulcrum {
namespace {

double max_over_mean_of(const std::vector<double>& v) {
  if (v.empty()) return 1;
  const double sum = std::accumulate(v.begin(), v.end(), 0.0);
  return sum > 0 ? *std::max_element(v.begin(), v.end()) * static_cast<double>(v.size()) / sum : 1;
}

// Tiles of tile x tile tokens of one item, counted per head, in which some pair is visible.
double active_tiles(const PlanDocument& doc, const AttentionItem& item, int q_heads, Tokens tile) {
  double tiles = 0;
  for (const auto& run : mask_runs(doc.mask, doc.head_masks, item.heads)) {
    const int heads = run.heads.count(q_heads);
    for (const auto& q : item.queries) {
      for (Tokens qt = q.position; qt < q.position + q.count; qt += tile) {
        const Range rows{qt, std::min(qt + tile, q.position + q.count)};
        for (Tokens kt = item.keys.position; kt < item.keys.position + item.keys.count; kt += tile) {
          const Range keys{kt, std::min(kt + tile, item.keys.position + item.keys.count)};
          if (run.mask->classify(rows, keys, doc.length) != TileKind::kEmpty) tiles += heads;
        }
      }
    }
  }
  return tiles;
}

}  // namespace

StepBalance step_balance(const StepMatrix& table) {
  StepBalance b;
  if (table.empty()) return b;
  const std::size_t steps = table.front().size();
  std::vector<double> totals;
  double step_sum = 0;
  for (const auto& row : table) {
    totals.push_back(std::accumulate(row.begin(), row.end(), 0.0));
    step_sum += max_over_mean_of(row);
  }
  b.worker = max_over_mean_of(totals);
  b.step_mean = step_sum / static_cast<double>(table.size());
  double max_sum = 0, mean_sum = 0;
  for (std::size_t t = 0; t < steps; ++t) {
    double top = 0, sum = 0;
    for (const auto& row : table) {
      top = std::max(top, row[t]);
      sum += row[t];
    }
    max_sum += top;
    mean_sum += sum / static_cast<double>(table.size());
  }
  b.step_sync = mean_sum > 0 ? max_sum / mean_sum : 1;
  return b;
}

PlanSteps plan_steps(const Plan& plan, Tokens tile_tokens) {
  const std::size_t ranks = plan.programs.size(), steps = static_cast<std::size_t>(std::max(plan.nano_batches, 1));
  PlanSteps out;
  out.flops.assign(ranks, std::vector<double>(steps, 0));
  out.active_tiles = out.bytes_sent = out.flops;
  for (std::size_t r = 0; r < ranks; ++r) {
    const Program& p = plan.programs[r];
    for (const auto& in : p.instructions) {
      const auto t = static_cast<std::size_t>(in.stream);
      const std::vector<AttentionItem>* items = nullptr;
      double factor = 1;
      if (const auto* a = std::get_if<Attention>(&in.op)) items = &a->items;
      if (const auto* b = std::get_if<AttentionBackward>(&in.op)) {
        items = &b->items;
        factor = kBackwardFlopsFactor;
      }
      if (const auto* l = std::get_if<CommLaunch>(&in.op)) {
        for (const auto& m : l->sends)
          out.bytes_sent[r][t] += static_cast<double>(plan.heads.bytes(p.buffers[m.slice.buffer].field, m.slice));
      }
      if (items == nullptr) continue;
      for (const auto& item : *items) {
        const auto& doc = plan.documents[item.doc];
        std::vector<Range> queries;
        for (const auto& q : item.queries) {
          if (q.count > 0) queries.push_back({q.position, q.position + q.count});
        }
        const Range keys{item.keys.position, item.keys.position + item.keys.count};
        out.flops[r][t] += factor * attention_forward_flops(plan.heads.head_dim, plan.heads.q_heads,
                                                            mask_runs(doc.mask, doc.head_masks, item.heads), queries,
                                                            keys, doc.length);
        if (tile_tokens > 0) out.active_tiles[r][t] += active_tiles(doc, item, plan.heads.q_heads, tile_tokens);
      }
    }
  }
  return out;
}

}  // namespace fulcrum
