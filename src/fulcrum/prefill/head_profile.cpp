#include "fulcrum/prefill/head_profile.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/core/random.hpp"
#include "fulcrum/core/statistics.hpp"
#include "fulcrum/kernels/attention.hpp"
#include "fulcrum/prefill/gemm.hpp"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <utility>

namespace fulcrum::prefill {
namespace {

using Clock = std::chrono::steady_clock;

std::size_t sz(long n) { return static_cast<std::size_t>(n); }

std::vector<float> random_values(std::size_t n, Rng& rng) {
  std::vector<float> out(n);
  for (float& x : out) x = static_cast<float>(2.0 * rng.uniform() - 1.0);
  return out;
}

// The median wall time of `repeats` runs of f after one warm-up run (first-touch, caches, thread start).
template <class F>
double median_time(int repeats, F&& f) {
  f();
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    const auto start = Clock::now();
    f();
    times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  return median(std::move(times));
}

// One head's attention over a prompt of t tokens with `mask`: the prefill's fused call with one slot.
double attention_time(const MaskSpec& mask, int t, int d, int repeats, Rng& rng) {
  const auto n = sz(long{t} * d);
  const auto q = random_values(n, rng), k = random_values(n, rng), v = random_values(n, rng);
  std::vector<float> o(n), lse(sz(t));
  kernels::AttentionTask task;
  task.queries[0] = RowSpan{0, 0, t};
  task.keys = RowSpan{0, 0, t};
  task.heads = HeadRange{0, 1};
  task.doc_len = t;
  task.mask = mask;
  const std::vector<kernels::AttentionTask> tasks = {task};
  kernels::AttentionShape shape;
  shape.q_heads = 1;
  shape.kv_heads = 1;
  shape.head_dim = d;
  using In = kernels::HeadTensor<const float>;
  return median_time(repeats, [&] {
    kernels::attention_forward<float>(tasks, shape, In{q.data(), t, 1, d}, In{k.data(), t, 1, d}, In{v.data(), t, 1, d},
                                      kernels::HeadTensor<float>{o.data(), t, 1, d},
                                      kernels::HeadTensor<float>{lse.data(), t, 1, 1});
  });
}

struct Projections {
  double qo = 0;
  double qkvo = 0;
};

// One head's projections as the prefill computes them: Q, K and V each x[t][hidden] · W[d][hidden]ᵀ, O as
// o[t][d] · W_O[d][hidden] into a [t][hidden] partial. Each GEMM timed on its own (medians), then summed.
Projections projection_times(int t, int d, int hidden, int repeats, Rng& rng) {
  const auto x = random_values(sz(long{t} * hidden), rng);
  const auto w = random_values(sz(long{d} * hidden), rng);
  const auto o = random_values(sz(long{t} * d), rng);
  std::vector<float> out(sz(long{t} * d)), partial(sz(long{t} * hidden));
  auto in_projection = [&] {
    return median_time(repeats,
                       [&] { gemm(true, t, d, hidden, x.data(), hidden, w.data(), hidden, out.data(), d, 0); });
  };
  const double q = in_projection(), k = in_projection(), v = in_projection();
  const double o_s = median_time(
      repeats, [&] { gemm(false, t, hidden, d, o.data(), d, w.data(), hidden, partial.data(), hidden, 0); });
  return {q + o_s, q + k + v + o_s};
}

}  // namespace

void HeadProfileConfig::validate() const {
  if (head_dim < 1 || head_dim > 1024) fail("head_dim = {}: must be in [1, 1024]", head_dim);
  if (hidden < 1 || hidden > 65536) fail("hidden = {}: must be in [1, 65536]", hidden);
  if (prompt_tokens.empty()) fail("prompt tokens: give at least one length");
  for (std::size_t i = 0; i < prompt_tokens.size(); ++i) {
    if (prompt_tokens[i] < 1 || prompt_tokens[i] > heads::kMaxPatternTokens) {
      fail("prompt tokens[{}] = {}: must be in [1, {}]", i, prompt_tokens[i], heads::kMaxPatternTokens);
    }
    if (i > 0 && prompt_tokens[i] <= prompt_tokens[i - 1]) {
      fail("prompt tokens[{}] = {}: must be larger than the length before it ({})", i, prompt_tokens[i],
           prompt_tokens[i - 1]);
    }
  }
  if (extrapolate && prompt_tokens.size() < 2) fail("extrapolate: needs at least two prompt lengths");
  if (patterns.empty()) fail("patterns: give at least one pattern to profile");
  for (const auto& p : patterns) p.validate("pattern");
  if (repeats < 1 || repeats > 1000) fail("repeats = {}: must be in [1, 1000]", repeats);
  if (threads < 0 || threads > 1024) fail("threads = {}: must be in [0, 1024] (0 = every core)", threads);
}

std::vector<heads::HeadPattern> profiled_patterns(const heads::HeadPatternReport& report, int layers) {
  FULCRUM_CHECK(layers >= 0 && std::cmp_less_equal(layers, report.layers.size()), "{} layers of {}", layers,
                report.layers.size());
  std::vector<heads::HeadPattern> out = {heads::HeadPattern::full()};
  std::set<std::string> seen = {out.front().key()};
  for (int l = 0; l < layers; ++l) {
    for (const auto& p : report.layers[sz(l)]) {
      if (seen.insert(p.key()).second) out.push_back(p);
    }
  }
  return out;
}

heads::RuntimeProfile profile_heads(const HeadProfileConfig& config,
                                    const std::function<void(int done, int total)>& progress) {
  config.validate();
  const int threads = config.threads > 0 ? config.threads : omp_get_num_procs();
  const int previous = omp_get_max_threads();
  omp_set_num_threads(threads);
  set_blas_threads(threads);
  heads::RuntimeProfile profile;
  profile.device = fmt::format("cpu: {} thread{}, fp32, head_dim {}, hidden {}, median of {}", threads,
                               threads == 1 ? "" : "s", config.head_dim, config.hidden, config.repeats);
  profile.prompt_tokens = config.prompt_tokens;
  profile.extrapolate = config.extrapolate;
  Rng rng(config.seed);
  const int total = static_cast<int>(config.prompt_tokens.size() * (config.patterns.size() + 1));
  int done = 0;
  auto step = [&] {
    if (progress) progress(++done, total);
  };
  for (const Tokens len : config.prompt_tokens) {
    const int t = static_cast<int>(len);
    const Projections p = projection_times(t, config.head_dim, config.hidden, config.repeats, rng);
    profile.qo_s.push_back(p.qo);
    profile.qkvo_s.push_back(p.qkvo);
    step();
    for (const auto& pattern : config.patterns) {
      const MaskSpec mask = heads::to_mask(pattern, len, heads::head_mask_seed(config.seed, 0, 0));
      profile.attention_s[pattern.key()].push_back(attention_time(mask, t, config.head_dim, config.repeats, rng));
      step();
    }
  }
  omp_set_num_threads(previous);
  return profile;
}

}  // namespace fulcrum::prefill
