#include "fulcrum/kernels/attention_task.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/cost/attention_cost.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace fulcrum::kernels {

void check_dims(std::string_view name, bool has_data, Tokens rows, int heads, int dim, Tokens want_rows, int want_heads,
                int want_dim) {
  if (rows != want_rows || heads != want_heads || dim != want_dim) {
    fail("{}: shape [{}, {}, {}] does not match the expected [{}, {}, {}] (rows, heads, head_dim)", name, rows, heads,
         dim, want_rows, want_heads, want_dim);
  }
  if (!has_data && rows > 0) fail("{}: no data for {} rows", name, rows);
}

float AttentionShape::softmax_scale() const {
  return static_cast<float>(scale > 0 ? scale : 1.0 / std::sqrt(static_cast<double>(head_dim)));
}

void AttentionShape::validate() const {
  if (q_heads < 1) fail("q_heads = {}: must be >= 1", q_heads);
  if (kv_heads < 1) fail("kv_heads = {}: must be >= 1", kv_heads);
  if (q_heads % kv_heads != 0) {
    fail("q_heads = {}: must be a multiple of kv_heads = {} (GQA groups)", q_heads, kv_heads);
  }
  if (head_dim < 1 || head_dim > 512) fail("head_dim = {}: must be in [1, 512]", head_dim);
  if (!std::isfinite(scale)) fail("scale = {}: must be finite", scale);
}

namespace {

void check_rows(std::size_t task, const char* field, const RowSpan& r, Tokens buffer_rows, const char* buffer,
                Tokens doc_len) {
  if (r.count < 0) fail("tasks[{}].{}: count = {} must be >= 0", task, field, r.count);
  if (r.count == 0) return;
  if (r.row < 0 || r.row + r.count > buffer_rows) {
    fail("tasks[{}].{}: rows [{}, {}) leave the {} buffer ({} rows)", task, field, r.row, r.row + r.count, buffer,
         buffer_rows);
  }
  if (r.position < 0 || r.position + r.count > doc_len) {
    fail("tasks[{}].{}: positions [{}, {}) leave the document ({} tokens)", task, field, r.position,
         r.position + r.count, doc_len);
  }
}

}  // namespace

AttentionTask task_from_item(const AttentionItem& item, const PlanDocument& doc) {
  AttentionTask t;
  static_cast<AttentionItem&>(t) = item;
  t.doc_len = doc.length;
  t.mask = doc.mask;
  t.head_masks = doc.head_masks;
  return t;
}

void validate_tasks(std::span<const AttentionTask> tasks, Tokens q_rows, Tokens kv_rows, int q_heads) {
  struct Owned {
    Range rows;
    int h0, h1;
    std::size_t task;
  };
  std::vector<Owned> owned;
  for (std::size_t t = 0; t < tasks.size(); ++t) {
    const auto& task = tasks[t];
    if (task.doc_len < 1) fail("tasks[{}].doc_len = {}: must be >= 1", t, task.doc_len);
    check_rows(t, "queries[0]", task.queries[0], q_rows, "Q", task.doc_len);
    check_rows(t, "queries[1]", task.queries[1], q_rows, "Q", task.doc_len);
    check_rows(t, "keys", task.keys, kv_rows, "K/V", task.doc_len);
    validate_head_range(task.heads, q_heads, fmt::format("tasks[{}].heads", t));
    validate_head_masks(task.head_masks, q_heads, fmt::format("tasks[{}].head_masks", t));
    check_mask_lengths(task.mask, task.head_masks, task.doc_len, fmt::format("tasks[{}]", t));
    for (const auto& q : task.queries) {
      if (q.count > 0) owned.push_back({{q.row, q.row + q.count}, task.heads.first(), task.heads.last(q_heads), t});
    }
  }
  // One writer per (row, head): a sweep over the ranges by first row, against every range still open.
  std::sort(owned.begin(), owned.end(), [](const Owned& a, const Owned& b) { return a.rows.begin < b.rows.begin; });
  std::vector<const Owned*> open;
  for (const auto& o : owned) {
    std::erase_if(open, [&](const Owned* p) { return p->rows.end <= o.rows.begin; });
    for (const Owned* p : open) {
      if (p->h0 < o.h1 && o.h0 < p->h1) {
        fail(
            "tasks[{}].queries: rows [{}, {}) of heads [{}, {}) overlap rows of tasks[{}] (heads [{}, {})); each "
            "output row and head needs one task (split keys into separate calls and merge)",
            o.task, o.rows.begin, o.rows.end, o.h0, o.h1, p->task, p->h0, p->h1);
      }
    }
    open.push_back(&o);
  }
}

double forward_flops(std::span<const AttentionTask> tasks, const AttentionShape& shape) {
  // All-head tasks over one mask: their pairs summed and multiplied once, as before tasks had heads.
  Tokens all_head_pairs = 0;
  double flops = 0;
  for (const auto& task : tasks) {
    if (task.heads.all() && task.head_masks.empty()) {
      const Range keys{task.keys.position, task.keys.position + task.keys.count};
      for (const auto& q : task.queries) {
        all_head_pairs += task.mask.count_pairs({q.position, q.position + q.count}, keys, task.doc_len);
      }
      continue;
    }
    const Range keys{task.keys.position, task.keys.position + task.keys.count};
    std::array<Range, 2> queries;
    std::size_t n = 0;
    for (const auto& q : task.queries) {
      if (q.count > 0) queries[n++] = {q.position, q.position + q.count};
    }
    flops += attention_forward_flops(shape.head_dim, shape.q_heads, task.mask_runs(), std::span(queries.data(), n),
                                     keys, task.doc_len);
  }
  return attention_flops_per_pair(shape.head_dim, shape.q_heads) * static_cast<double>(all_head_pairs) + flops;
}

}  // namespace fulcrum::kernels
