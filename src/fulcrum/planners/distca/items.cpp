#include "fulcrum/planners/distca/items.hpp"

#include "fulcrum/cost/attention_cost.hpp"
#include "fulcrum/planners/planner.hpp"

namespace fulcrum::distca {

double rows_flops(const ModelShape& model, const Document& doc, Range rows, Range keys) {
  return static_cast<double>(doc.planning_mask().count_pairs(rows, intersect(keys, {0, doc.length}), doc.length)) *
         attention_forward_flops_per_pair(model);
}

std::vector<Item> initial_items(const Batch& batch, const ModelShape& model) {
  std::vector<Item> items;
  items.reserve(batch.segments.size());
  for (const auto& s : batch.segments) {
    items.push_back({s.doc, {s.tokens, Range{}}, s.rank, rows_flops(model, batch.documents[s.doc], s.tokens)});
  }
  return items;
}

std::vector<CATask> items_to_tasks(const Batch& batch, const std::vector<Item>& items) {
  std::vector<CATask> tasks;
  tasks.reserve(items.size());
  for (const auto& item : items) {
    std::array<Range, 2> rows = item.rows;
    if (rows[0].empty()) std::swap(rows[0], rows[1]);
    if (rows[0].empty()) continue;
    CATask task{item.doc, rows, {}, item.server};
    task.keys = intersect(visible_key_hull(batch.documents[item.doc], task.query_ranges()), item.keys);
    tasks.push_back(task);
  }
  return tasks;
}

Assignment items_to_assignment(const Batch& batch, const std::vector<Item>& items) {
  Assignment a{.planner = {}, .batch = batch, .tasks = items_to_tasks(batch, items), .transfers = {}};
  a.transfers = minimal_transfers(a.batch, a.tasks);
  return a;
}

}  // namespace fulcrum::distca
