#include "fulcrum/prefill/prefill_report.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/core/statistics.hpp"

#include <algorithm>

namespace fulcrum::prefill {
namespace {
constexpr std::size_t kFields = 6;
}  // namespace

double PrefillReport::attention_spread(int layer) const {
  double lo = 0, hi = 0;
  for (int r = 0; r < ranks; ++r) {
    const double t = times[static_cast<std::size_t>(r)][static_cast<std::size_t>(layer)].attention_s;
    lo = r == 0 ? t : std::min(lo, t);
    hi = r == 0 ? t : std::max(hi, t);
  }
  return hi > 0 ? (hi - lo) / hi : 0;
}

double PrefillReport::mean_attention_spread() const {
  const auto layers = times.empty() ? 0 : times.front().size();
  double sum = 0;
  for (std::size_t l = 0; l < layers; ++l) sum += attention_spread(static_cast<int>(l));
  return layers == 0 ? 0 : sum / static_cast<double>(layers);
}

double PrefillReport::latency_s() const { return *std::max_element(total_s.begin(), total_s.end()); }

double PrefillReport::tokens_per_s() const {
  const double latency = latency_s();
  return latency > 0 ? static_cast<double>(tokens) / latency : 0;
}

LayerTimes PrefillReport::rank_total(int rank) const {
  LayerTimes sum;
  for (const auto& t : times[static_cast<std::size_t>(rank)]) {
    sum.attention_s += t.attention_s;
    sum.projection_s += t.projection_s;
    sum.mlp_s += t.mlp_s;
    sum.all_reduce_s += t.all_reduce_s;
    sum.prefetch_wait_s += t.prefetch_wait_s;
    sum.weight_bytes += t.weight_bytes;
  }
  return sum;
}

PrefillReport median_report(const std::vector<PrefillReport>& runs) {
  FULCRUM_CHECK(!runs.empty(), "median of no runs");
  PrefillReport out = runs.front();
  auto median_of = [&](auto field) {
    std::vector<double> values;
    values.reserve(runs.size());
    for (const auto& run : runs) values.push_back(field(run));
    return median(values);
  };
  for (std::size_t r = 0; r < out.times.size(); ++r) {
    out.total_s[r] = median_of([&](const PrefillReport& x) { return x.total_s[r]; });
    for (std::size_t l = 0; l < out.times[r].size(); ++l) {
      auto& t = out.times[r][l];
      auto at = [&](const PrefillReport& x) -> const LayerTimes& { return x.times[r][l]; };
      t.attention_s = median_of([&](const PrefillReport& x) { return at(x).attention_s; });
      t.projection_s = median_of([&](const PrefillReport& x) { return at(x).projection_s; });
      t.mlp_s = median_of([&](const PrefillReport& x) { return at(x).mlp_s; });
      t.all_reduce_s = median_of([&](const PrefillReport& x) { return at(x).all_reduce_s; });
      t.prefetch_wait_s = median_of([&](const PrefillReport& x) { return at(x).prefetch_wait_s; });
      t.weight_bytes = median_of([&](const PrefillReport& x) { return at(x).weight_bytes; });
    }
  }
  return out;
}

PrefillReport gather_prefill_report(const RankPrefill& mine, long tokens, runtime::Communicator& comm) {
  std::vector<double> values;
  for (const auto& t : mine.layers) {
    values.insert(values.end(),
                  {t.attention_s, t.projection_s, t.mlp_s, t.all_reduce_s, t.prefetch_wait_s, t.weight_bytes});
  }
  values.push_back(mine.total_s);
  const auto all = comm.all_gather(values);
  const std::size_t per_rank = values.size();
  FULCRUM_CHECK(all.size() == per_rank * static_cast<std::size_t>(comm.size()), "gathered {} values", all.size());
  PrefillReport report;
  report.ranks = comm.size();
  report.tokens = tokens;
  for (int r = 0; r < comm.size(); ++r) {
    const double* v = all.data() + static_cast<std::size_t>(r) * per_rank;
    auto& layers = report.times.emplace_back();
    for (std::size_t l = 0; l < mine.layers.size(); ++l) {
      const double* f = v + l * kFields;
      layers.push_back({f[0], f[1], f[2], f[3], f[4], f[5]});
    }
    report.total_s.push_back(v[per_rank - 1]);
  }
  return report;
}

}  // namespace fulcrum::prefill
