#include "fulcrum/kernels/profile.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/core/memory_budget.hpp"

#include <omp.h>

#include <algorithm>

namespace fulcrum::kernels {

namespace {

// Copies of a cell's q_len rows fused into one call: enough 64-row blocks (per head) for 8 per thread.
Tokens cell_copies(const ProfileConfig& config, Tokens q_len) {
  const Tokens work_items = 8 * omp_get_max_threads();
  const Tokens per_copy = (q_len + 63) / 64 * config.shape.q_heads;
  return std::max<Tokens>(1, (work_items + per_copy - 1) / per_copy);
}

}  // namespace

void ProfileConfig::validate() const {
  shape.validate();
  if (repeats < 1 || repeats > kMaxMeasuredRepeats)
    fail("repeats = {}: must be in [1, {}]", repeats, kMaxMeasuredRepeats);
  for (const auto* axis : {&query_lengths, &key_lengths}) {
    const char* name = axis == &query_lengths ? "query-lengths" : "key-lengths";
    if (axis->empty()) fail("{}: at least one length", name);
    if (axis->size() > kMaxProfileAxis) fail("{}: {} lengths, at most {}", name, axis->size(), kMaxProfileAxis);
    for (std::size_t i = 0; i < axis->size(); ++i) {
      if ((*axis)[i] < 1 || (*axis)[i] > kMaxMeasuredLength) {
        fail("{}: {} must be in [1, {}]", name, (*axis)[i], kMaxMeasuredLength);
      }
      if (i > 0 && (*axis)[i] <= (*axis)[i - 1]) fail("{}: must be strictly ascending", name);
    }
  }
  // The largest cell: its query rows fused with copies of itself until every thread has work.
  const Tokens q_len = query_lengths.back(), k_len = key_lengths.back();
  check_memory_estimate(fmt::format("query-lengths: {}, key-lengths: {}", q_len, k_len),
                        measured_call_bytes(shape, cell_copies(*this, q_len) * q_len, k_len));
}

Profile profile_attention(const ProfileConfig& config, const std::function<void(int, int)>& progress) {
  config.validate();
  ProfileTable table = ProfileTable::from_peak(1);
  for (ThroughputGrid* grid : {&table.forward(), &table.backward()}) {
    grid->query_lengths = config.query_lengths;
    grid->key_lengths = config.key_lengths;
    grid->flops_per_s.clear();
  }
  struct Cell {
    double forward_flops, forward_s, backward_flops, backward_s;
    Tokens copies;
  };
  std::vector<Cell> cells;
  const int total = static_cast<int>(config.query_lengths.size() * config.key_lengths.size());
  for (Tokens q_len : config.query_lengths) {
    for (Tokens k_len : config.key_lengths) {
      const Tokens copies = cell_copies(config, q_len);
      std::vector<AttentionTask> tasks;
      const Tokens doc_len = std::max(q_len, k_len);
      for (Tokens c = 0; c < copies; ++c) {
        tasks.push_back({{0, {RowSpan{c * q_len, 0, q_len}, RowSpan{}}, {0, 0, k_len}}, doc_len, MaskSpec::full()});
      }
      const auto t = time_attention(tasks, config.shape, copies * q_len, k_len, config.dtype, config.repeats, true);
      cells.push_back({t.forward_flops, t.forward_s, t.backward_flops, t.backward_s, copies});
      if (progress) progress(static_cast<int>(cells.size()), total);
    }
  }
  const CallOverheads fixed = measure_call_overheads(config.shape, config.dtype, config.repeats);
  // The work's own seconds: the call's fixed costs out, but never below a quarter of the measured time (a
  // fixed cost measured a little high must not make a small cell look many times faster than it ran).
  const auto work_s = [&](double measured, Tokens copies, bool backward) {
    constexpr double kLeastWorkShare = 0.25;
    return std::max(measured - fixed.attention_call_s(static_cast<std::size_t>(copies), backward),
                    kLeastWorkShare * measured);
  };
  for (const Cell& c : cells) {
    table.forward().flops_per_s.push_back(c.forward_flops / work_s(c.forward_s, c.copies, false));
    table.backward().flops_per_s.push_back(c.backward_flops / work_s(c.backward_s, c.copies, true));
  }
  table.forward().validate("forward");
  table.backward().validate("backward");
  return {table, fixed};
}

}  // namespace fulcrum::kernels
