#include "fulcrum/kernels/profile.hpp"

#include "fulcrum/core/error.hpp"

#include <omp.h>

#include <algorithm>

namespace fulcrum::kernels {

void ProfileConfig::validate() const {
  shape.validate();
  if (repeats < 1) fail("repeats = {}: must be >= 1", repeats);
  for (const auto* axis : {&query_lengths, &key_lengths}) {
    const char* name = axis == &query_lengths ? "query-lengths" : "key-lengths";
    if (axis->empty()) fail("{}: at least one length", name);
    for (std::size_t i = 0; i < axis->size(); ++i) {
      if ((*axis)[i] < 1) fail("{}: {} must be >= 1", name, (*axis)[i]);
      if (i > 0 && (*axis)[i] <= (*axis)[i - 1]) fail("{}: must be strictly ascending", name);
    }
  }
}

ProfileTable profile_attention(const ProfileConfig& config, const std::function<void(int, int)>& progress) {
  config.validate();
  ProfileTable table = ProfileTable::from_peak(1);
  for (ThroughputGrid* grid : {&table.forward(), &table.backward()}) {
    grid->query_lengths = config.query_lengths;
    grid->key_lengths = config.key_lengths;
    grid->flops_per_s.clear();
  }
  const Tokens work_items = 8 * omp_get_max_threads();
  const int total = static_cast<int>(config.query_lengths.size() * config.key_lengths.size());
  int done = 0;
  for (Tokens q_len : config.query_lengths) {
    for (Tokens k_len : config.key_lengths) {
      const Tokens per_copy = (q_len + 63) / 64 * config.shape.q_heads;
      const Tokens copies = std::max<Tokens>(1, (work_items + per_copy - 1) / per_copy);
      std::vector<AttentionTask> tasks;
      const Tokens doc_len = std::max(q_len, k_len);
      for (Tokens c = 0; c < copies; ++c) {
        tasks.push_back({{0, {RowSpan{c * q_len, 0, q_len}, RowSpan{}}, {0, 0, k_len}}, doc_len, MaskSpec::full()});
      }
      const auto t = time_attention(tasks, config.shape, copies * q_len, k_len, config.dtype, config.repeats, true);
      table.forward().flops_per_s.push_back(t.forward_flops / t.forward_s);
      table.backward().flops_per_s.push_back(t.backward_flops / t.backward_s);
      if (progress) progress(++done, total);
    }
  }
  table.forward().validate("forward");
  table.backward().validate("backward");
  return table;
}

}  // namespace fulcrum::kernels
