// The pieces bound (cost_model.hpp, pieces_lower_bound): a relaxation of the head assignment that keeps,
// per device, how many heavy heads it holds, in how many KV-group pieces, and how many pieces it pays in
// all, and forgets which light head goes where. Solved exactly by a DP over devices for each trial T.
#include "fulcrum/planners/heads/cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace fulcrum::heads {
namespace {

constexpr double kMaxDpSteps = 4e6;  // a few ms; S10 needs about 0.4e6 (lpt-ls runs up to two)

struct PiecesRelaxation {
  std::vector<double> heavy_prefix;  // [f]: Σ of the f lightest heavy heads' t_attn + t_qo
  std::vector<double> light_prefix;  // [m]: Σ of the m lightest light heads' t_attn + t_qo
  int heavy = 0;
  int light = 0;
  int max_saving = 0;  // heavy heads - groups holding one: Σ over devices of (heavy heads - heavy pieces)
  int max_heavy_in_group = 0;
  int group_size = 1;
  int groups = 0;
  int heads = 0;
  int devices = 1;
  double kv = 0;
  double work = 0;  // Σ (t_attn + t_qo)

  // One device's way to take part: f heavy heads in q pieces, p pieces in all, and at most `cap` light heads.
  struct Config {
    int f, saving, p, cap;
  };

  // Whether some assignment could keep every device's compute within t, as the relaxation sees it.
  bool allows(double t) const {
    const double slack = t * (1 + 1e-12);
    if (work + groups * kv > devices * slack) return false;
    const int max_pieces =
        kv > 0 ? std::min(heads, static_cast<int>(std::floor((devices * slack - work) / kv))) : heads;
    std::vector<Config> configs{{0, 0, 0, 0}};  // an idle device
    for (int f = 0; f <= heavy && heavy_prefix[static_cast<std::size_t>(f)] <= slack; ++f) {
      for (int q = f > 0 ? 1 : 0; q <= f; ++q) {
        if (f > q * max_heavy_in_group) continue;
        for (int p = std::max(q, 1); p <= max_pieces; ++p) {
          const double fixed = heavy_prefix[static_cast<std::size_t>(f)] + p * kv;
          if (fixed > slack) break;
          // p pieces hold at most p x group_size heads; the light ones must fit under t too.
          int cap = std::min(light, p * group_size - f);
          while (cap > 0 && fixed + light_prefix[static_cast<std::size_t>(cap)] > slack) --cap;
          if (cap < 0 || (f == 0 && cap == 0)) break;
          configs.push_back({f, f - q, p, cap});
          if (cap < p * group_size - f) break;  // weight-bound: more pieces add nothing
        }
      }
    }
    // Too large a DP (many heavy heads on many devices) refutes nothing rather than take long: still valid.
    const double work_estimate = static_cast<double>(heavy + 1) * (max_saving + 1) * (max_pieces + 1) *
                                 static_cast<double>(configs.size()) * devices;
    if (work_estimate > kMaxDpSteps) return true;
    // best[F][S][P]: the most light heads devices so far can hold with F heavy heads, S savings, P pieces.
    const int fs = heavy + 1;
    const int ss = max_saving + 1;
    const int ps = max_pieces + 1;
    auto at = [&](int f, int s, int p) {
      return (static_cast<std::size_t>(f) * static_cast<std::size_t>(ss) + static_cast<std::size_t>(s)) *
                 static_cast<std::size_t>(ps) +
             static_cast<std::size_t>(p);
    };
    std::vector<int> best(static_cast<std::size_t>(fs) * static_cast<std::size_t>(ss) * static_cast<std::size_t>(ps),
                          -1);
    std::vector<int> next(best.size());
    best[at(0, 0, 0)] = 0;
    for (int d = 0; d < devices; ++d) {
      std::fill(next.begin(), next.end(), -1);
      for (int f = 0; f < fs; ++f) {
        for (int s = 0; s < ss; ++s) {
          for (int p = 0; p < ps; ++p) {
            const int have = best[at(f, s, p)];
            if (have < 0) continue;
            for (const Config& c : configs) {
              if (f + c.f >= fs || s + c.saving >= ss || p + c.p >= ps) continue;
              int& slot = next[at(f + c.f, s + c.saving, p + c.p)];
              slot = std::max(slot, std::min(light, have + c.cap));
            }
          }
        }
      }
      best.swap(next);
    }
    for (int s = 0; s < ss; ++s) {
      for (int p = 0; p < ps; ++p) {
        if (best[at(heavy, s, p)] >= light) return true;
      }
    }
    return false;
  }
};

PiecesRelaxation relaxation(const LayerCosts& costs, int devices) {
  PiecesRelaxation r;
  r.group_size = costs.group_size;
  r.groups = costs.groups();
  r.heads = costs.heads();
  r.devices = devices;
  r.kv = costs.kv_s();
  std::vector<double> weight;
  for (double a : costs.attention_s) weight.push_back(a + costs.qo_s);
  r.work = std::accumulate(weight.begin(), weight.end(), 0.0);
  std::vector<int> order(weight.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return weight[static_cast<std::size_t>(a)] > weight[static_cast<std::size_t>(b)];
  });
  // Heavy: the heads above the steepest drop in weight among the 3·D heaviest (at least a halving), the
  // class whose per-device count the others fill around (FULL heads among sparse ones). None without one.
  double steepest = 0;
  for (int k = 1; k < std::min(costs.heads(), 3 * devices + 1); ++k) {
    const double lo = weight[static_cast<std::size_t>(order[static_cast<std::size_t>(k)])];
    const double hi = weight[static_cast<std::size_t>(order[static_cast<std::size_t>(k - 1)])];
    const double ratio = lo > 0 ? hi / lo : (hi > 0 ? HUGE_VAL : 1.0);
    if (ratio >= 2 && ratio > steepest) {
      steepest = ratio;
      r.heavy = k;
    }
  }
  r.light = costs.heads() - r.heavy;
  std::vector<int> heavy_in_group(static_cast<std::size_t>(costs.groups()), 0);
  std::vector<double> heavy_w;
  std::vector<double> light_w;
  for (int i = 0; i < costs.heads(); ++i) {
    const int h = order[static_cast<std::size_t>(i)];
    if (i < r.heavy) {
      heavy_w.push_back(weight[static_cast<std::size_t>(h)]);
      ++heavy_in_group[static_cast<std::size_t>(costs.group_of(h))];
    } else {
      light_w.push_back(weight[static_cast<std::size_t>(h)]);
    }
  }
  const int heavy_groups =
      static_cast<int>(std::count_if(heavy_in_group.begin(), heavy_in_group.end(), [](int n) { return n > 0; }));
  r.max_saving = r.heavy - heavy_groups;
  r.max_heavy_in_group = *std::max_element(heavy_in_group.begin(), heavy_in_group.end());
  auto prefix = [](std::vector<double> w) {
    std::sort(w.begin(), w.end());
    std::vector<double> s(w.size() + 1, 0.0);
    for (std::size_t i = 0; i < w.size(); ++i) s[i + 1] = s[i] + w[i];
    return s;
  };
  r.heavy_prefix = prefix(heavy_w);
  r.light_prefix = prefix(light_w);
  return r;
}

}  // namespace

bool pieces_allow(const LayerCosts& costs, int devices, double t) { return relaxation(costs, devices).allows(t); }

double pieces_lower_bound(const LayerCosts& costs, int devices, double floor) {
  const PiecesRelaxation r = relaxation(costs, devices);
  double lo = std::max(floor, r.work / devices);
  if (r.allows(lo)) return lo;
  double hi = lo * 1.05;
  while (!r.allows(hi)) {
    lo = hi;
    hi *= 1.05;
  }
  // lo is refuted, hi allowed: bisect to a relative 1e-6 (the bound is lo, a value no assignment reaches).
  while (hi - lo > 1e-6 * hi) {
    const double mid = 0.5 * (lo + hi);
    (r.allows(mid) ? hi : lo) = mid;
  }
  return lo;
}

}  // namespace fulcrum::heads
