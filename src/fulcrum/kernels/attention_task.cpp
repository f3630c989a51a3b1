#include "fulcrum/kernels/attention_task.hpp"

#include "fulcrum/core/error.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace fulcrum::kernels {

void check_dims(std::string_view name, bool has_data, Tokens rows, int heads, int dim, Tokens want_rows,
                int want_heads, int want_dim) {
  if (rows != want_rows || heads != want_heads || dim != want_dim) {
    fail("{}: shape [{}, {}, {}] does not match the expected [{}, {}, {}] (rows, heads, head_dim)", name, rows,
         heads, dim, want_rows, want_heads, want_dim);
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

void check_rows(std::size_t task, const char* field, const TokenRows& r, Tokens buffer_rows,
                const char* buffer, Tokens doc_len) {
  if (r.count < 0) fail("tasks[{}].{}: count = {} must be >= 0", task, field, r.count);
  if (r.count == 0) return;
  if (r.row < 0 || r.row + r.count > buffer_rows) {
    fail("tasks[{}].{}: rows [{}, {}) leave the {} buffer ({} rows)", task, field, r.row, r.row + r.count,
         buffer, buffer_rows);
  }
  if (r.position < 0 || r.position + r.count > doc_len) {
    fail("tasks[{}].{}: positions [{}, {}) leave the document ({} tokens)", task, field, r.position,
         r.position + r.count, doc_len);
  }
}

}  // namespace

void validate_tasks(std::span<const AttentionTask> tasks, Tokens q_rows, Tokens kv_rows) {
  struct Owned {
    Range rows;
    std::size_t task;
  };
  std::vector<Owned> owned;
  for (std::size_t t = 0; t < tasks.size(); ++t) {
    const auto& task = tasks[t];
    if (task.doc_len < 1) fail("tasks[{}].doc_len = {}: must be >= 1", t, task.doc_len);
    check_rows(t, "queries[0]", task.queries[0], q_rows, "Q", task.doc_len);
    check_rows(t, "queries[1]", task.queries[1], q_rows, "Q", task.doc_len);
    check_rows(t, "keys", task.keys, kv_rows, "K/V", task.doc_len);
    for (const auto& q : task.queries) {
      if (q.count > 0) owned.push_back({{q.row, q.row + q.count}, t});
    }
  }
  std::sort(owned.begin(), owned.end(), [](const Owned& a, const Owned& b) { return a.rows.begin < b.rows.begin; });
  for (std::size_t i = 1; i < owned.size(); ++i) {
    if (owned[i].rows.begin < owned[i - 1].rows.end) {
      fail("tasks[{}].queries: rows [{}, {}) overlap rows of tasks[{}]; each output row needs one task "
           "(split keys into separate calls and merge)",
           owned[i].task, owned[i].rows.begin, owned[i].rows.end, owned[i - 1].task);
    }
  }
}

Tokens task_pairs(std::span<const AttentionTask> tasks) {
  Tokens pairs = 0;
  for (const auto& task : tasks) {
    const Range keys{task.keys.position, task.keys.position + task.keys.count};
    for (const auto& q : task.queries) {
      pairs += task.mask.count_pairs({q.position, q.position + q.count}, keys, task.doc_len);
    }
  }
  return pairs;
}

double forward_flops(std::span<const AttentionTask> tasks, const AttentionShape& shape) {
  return 4.0 * shape.head_dim * shape.q_heads * static_cast<double>(task_pairs(tasks));
}

}  // namespace fulcrum::kernels
