#include "fulcrum/sparse/synthetic_attention.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/core/random.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <set>

namespace fulcrum::sparse {
namespace {

// Uniform in [-1, 1) from the value's coordinates: the same number on every rank that generates it.
double hashed_uniform(std::uint64_t seed, SyntheticTensor tensor, int head, Tokens position, Tokens element) {
  std::uint64_t h = mix64(seed ^ mix64(static_cast<std::uint64_t>(tensor) + 0x5171));
  h = mix64(h ^ static_cast<std::uint64_t>(head));
  h = mix64(h ^ static_cast<std::uint64_t>(position));
  h = mix64(h ^ static_cast<std::uint64_t>(element));
  return static_cast<double>(h >> 11) * 0x1p-52 - 1.0;
}

// Independent streams for the kv heads' patterns and the q heads' strengths.
Rng pattern_rng(std::uint64_t seed, std::uint64_t stream) { return Rng(mix64(mix64(seed) ^ stream)); }

double uniform(Rng& rng, double lo, double hi) { return lo + (hi - lo) * rng.uniform(); }

}  // namespace

void SyntheticOptions::validate() const {
  const auto logit = [](const char* name, double value) {
    if (!(value >= 0.0 && std::isfinite(value))) fail("{} = {}: must be finite and >= 0", name, value);
  };
  logit("slash_logit", slash_logit);
  logit("band_logit", band_logit);
  logit("vertical_logit", vertical_logit);
  if (heavy_tokens < 0) fail("heavy_tokens = {}: must be >= 0", heavy_tokens);
  if (!(min_period > 0.0 && min_period <= 1.0)) fail("min_period = {}: must be in (0, 1]", min_period);
  if (!(max_period >= min_period && max_period <= 1.0)) {
    fail("max_period = {}: must be in [min_period ({}), 1]", max_period, min_period);
  }
  if (band_tokens < 1) fail("band_tokens = {}: must be >= 1", band_tokens);
  if (!(noise >= 0.0 && std::isfinite(noise))) fail("noise = {}: must be finite and >= 0", noise);
}

SyntheticAttention::SyntheticAttention(std::uint64_t seed, int q_heads, int kv_heads, int head_dim, Tokens doc_len,
                                       SyntheticOptions options)
    : seed_(seed), q_heads_(q_heads), kv_heads_(kv_heads), head_dim_(head_dim), doc_len_(doc_len), options_(options) {
  if (q_heads < 1) fail("q_heads = {}: must be >= 1", q_heads);
  if (kv_heads < 1) fail("kv_heads = {}: must be >= 1", kv_heads);
  if (q_heads % kv_heads != 0) fail("q_heads = {}: must be a multiple of kv_heads ({})", q_heads, kv_heads);
  if (head_dim < 6 || head_dim % 2 != 0) fail("head_dim = {}: must be even and >= 6", head_dim);
  if (doc_len < 2) fail("doc_len = {}: must be >= 2", doc_len);
  options_.validate();
  const int pairs = head_dim / 2 - 1;
  periodic_pairs_ = (pairs + 1) / 2;
  decay_pairs_ = pairs - periodic_pairs_;
  const auto length = static_cast<double>(doc_len);

  std::vector<Tokens> periods;
  for (int g = 0; g < kv_heads; ++g) {
    Rng rng = pattern_rng(seed, 2 * static_cast<std::uint64_t>(g) + 1);
    const auto period =
        std::max<Tokens>(2, std::llround(uniform(rng, options_.min_period, options_.max_period) * length));
    periods.push_back(period);
    KvPattern kv;
    for (int j = 1; j <= periodic_pairs_; ++j) {
      kv.theta.push_back(2.0 * std::numbers::pi * j / static_cast<double>(period));
    }
    const double band = std::min(static_cast<double>(options_.band_tokens), length);
    for (int j = 0; j < decay_pairs_; ++j) {
      const double t = decay_pairs_ == 1 ? 0.5 : static_cast<double>(j) / (decay_pairs_ - 1);
      const double radius = band * std::pow(length / band, t) * uniform(rng, 0.8, 1.2);
      kv.theta.push_back(std::numbers::pi / (2.0 * radius));
    }
    std::set<Tokens> heavy = {0};
    const auto wanted = static_cast<std::size_t>(std::min<Tokens>(options_.heavy_tokens, doc_len - 1)) + 1;
    while (heavy.size() < wanted) heavy.insert(rng.uniform_int(1, doc_len - 1));
    kv.heavy.assign(heavy.begin(), heavy.end());
    for (std::size_t i = 0; i < kv.heavy.size(); ++i) kv.weight.push_back(uniform(rng, 0.95, 1.05));
    kv_.push_back(std::move(kv));
  }
  const int group = q_heads / kv_heads;
  for (int h = 0; h < q_heads; ++h) {
    Rng rng = pattern_rng(seed, 2 * static_cast<std::uint64_t>(h) + 2);
    const auto& kv = kv_[static_cast<std::size_t>(h / group)];
    SyntheticPattern p;
    p.period = periods[static_cast<std::size_t>(h / group)];
    for (Tokens d = 0; d < doc_len; d += p.period) p.slash_offsets.push_back(d);
    p.vertical_tokens = kv.heavy;
    p.vertical_weights = kv.weight;
    p.slash_logit = options_.slash_logit * uniform(rng, 0.9, 1.1);
    p.band_logit = options_.band_logit * uniform(rng, 0.9, 1.1);
    p.vertical_logit = options_.vertical_logit * uniform(rng, 0.9, 1.1);
    patterns_.push_back(std::move(p));
  }
}

int SyntheticAttention::heads(SyntheticTensor tensor) const {
  return tensor == SyntheticTensor::kK || tensor == SyntheticTensor::kV ? kv_heads_ : q_heads_;
}

double SyntheticAttention::heavy_weight(int kv_head, Tokens position) const {
  const auto& kv = kv_[static_cast<std::size_t>(kv_head)];
  const auto it = std::lower_bound(kv.heavy.begin(), kv.heavy.end(), position);
  if (it == kv.heavy.end() || *it != position) return 0.0;
  return kv.weight[static_cast<std::size_t>(it - kv.heavy.begin())];
}

void SyntheticAttention::row(SyntheticTensor tensor, Tokens position, int head, std::span<float> out) const {
  FULCRUM_CHECK(out.size() == static_cast<std::size_t>(head_dim_), "row of {} values, head_dim {}", out.size(),
                head_dim_);
  FULCRUM_CHECK(head >= 0 && head < heads(tensor), "head {} of {}", head, heads(tensor));
  FULCRUM_CHECK(position >= 0 && position < doc_len_, "position {} outside [0, {})", position, doc_len_);
  if (tensor == SyntheticTensor::kV || tensor == SyntheticTensor::kDO) {
    for (int e = 0; e < head_dim_; ++e)
      out[static_cast<std::size_t>(e)] = static_cast<float>(hashed_uniform(seed_, tensor, head, position, e));
    return;
  }
  const bool is_q = tensor == SyntheticTensor::kQ;
  const int kv_head = is_q ? head / (q_heads_ / kv_heads_) : head;
  const auto& kv = kv_[static_cast<std::size_t>(kv_head)];
  // Strengths are logits after the 1/sqrt(d) scale, spread evenly over the pairs of their kind.
  const double root_d = std::sqrt(static_cast<double>(head_dim_));
  const SyntheticPattern* p = is_q ? &patterns_[static_cast<std::size_t>(head)] : nullptr;
  const auto m = static_cast<double>(position);
  std::vector<double> values(static_cast<std::size_t>(head_dim_), 0.0);
  // A heavy token's key is an outlier: only its vertical element, so its logit is the same from every
  // query (a pure vertical, not boosted or damped by the offset it happens to sit at).
  const double weight = is_q ? 0.0 : heavy_weight(kv_head, position);
  for (int j = 0; j < periodic_pairs_ + decay_pairs_; ++j) {
    const double angle = m * kv.theta[static_cast<std::size_t>(j)];
    double amplitude = weight > 0.0 ? 0.0 : 1.0;
    if (is_q) {
      amplitude =
          j < periodic_pairs_ ? p->slash_logit * root_d / periodic_pairs_ : p->band_logit * root_d / decay_pairs_;
    }
    values[2 * static_cast<std::size_t>(j)] = amplitude * std::cos(angle);
    values[2 * static_cast<std::size_t>(j) + 1] = amplitude * std::sin(angle);
  }
  const auto vertical = static_cast<std::size_t>(head_dim_ - 2);
  if (is_q) {
    values[vertical] = p->vertical_logit * root_d;
  } else {
    values[vertical] = weight;
    for (int e = 0; e < head_dim_; ++e) {
      values[static_cast<std::size_t>(e)] += options_.noise * hashed_uniform(seed_, tensor, head, position, e);
    }
  }
  for (int e = 0; e < head_dim_; ++e)
    out[static_cast<std::size_t>(e)] = static_cast<float>(values[static_cast<std::size_t>(e)]);
}

void SyntheticAttention::rows(SyntheticTensor tensor, Range positions, std::span<float> out) const {
  const int h = heads(tensor);
  const auto width = static_cast<std::size_t>(h) * static_cast<std::size_t>(head_dim_);
  if (positions.begin < 0 || positions.end > doc_len_ || positions.begin > positions.end) {
    fail("positions = [{}, {}): must lie in [0, {}]", positions.begin, positions.end, doc_len_);
  }
  FULCRUM_CHECK(out.size() == static_cast<std::size_t>(positions.size()) * width, "{} values for {} rows of {}",
                out.size(), positions.size(), width);
  std::size_t at = 0;
  for (Tokens p = positions.begin; p < positions.end; ++p) {
    for (int head = 0; head < h; ++head, at += static_cast<std::size_t>(head_dim_)) {
      row(tensor, p, head, out.subspan(at, static_cast<std::size_t>(head_dim_)));
    }
  }
}

std::vector<float> SyntheticAttention::rows(SyntheticTensor tensor, Range positions) const {
  if (positions.begin > positions.end) fail("positions = [{}, {}): begin after end", positions.begin, positions.end);
  std::vector<float> out(static_cast<std::size_t>(positions.size()) * static_cast<std::size_t>(heads(tensor)) *
                         static_cast<std::size_t>(head_dim_));
  rows(tensor, positions, out);
  return out;
}

}  // namespace fulcrum::sparse
