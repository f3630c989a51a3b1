#include "fulcrum/sparse/estimator.hpp"

#include "fulcrum/core/error.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace fulcrum::sparse {
namespace {

// Keys per pass of the logit loop: [head_dim][kKeyBlock] floats of K (32 KB at head_dim 64) stay in L1
// while every observation row of the q head streams over them.
constexpr Tokens kKeyBlock = 128;
// Entries of A are rounded down to multiples of 2^-50: all of them sum to at most 1, so every partial sum
// is a multiple of 2^-50 below 2^3, exact in fp64's 53 bits.
constexpr int kMassBits = 50;

// Rounds down to a multiple of 2^-bits. Scaling by a power of two is exact (the values here are in
// [0, 1], far from overflow and from subnormals), so this equals ldexp(floor(ldexp(value, bits)), -bits)
// bit for bit, without libm's scalbn, which was half of the estimator's time (docs/performance.md).
struct RoundDown {
  explicit RoundDown(int bits) : scale(std::ldexp(1.0, bits)), inverse(std::ldexp(1.0, -bits)) {}
  double operator()(double value) const { return std::floor(value * scale) * inverse; }
  double scale, inverse;
};

// Row sums add doc_len terms <= 1: multiples of 2^-bits stay exact while doc_len < 2^(53 - bits).
int exp_sum_bits(Tokens doc_len) { return 52 - static_cast<int>(std::bit_width(static_cast<std::uint64_t>(doc_len))); }

// One entry of A: exp(l - max) / (row sum * rows), rounded down so that sums are exact.
double mass(float exp_value, double row_sum, Tokens rows) {
  static const RoundDown round_down(kMassBits);
  return round_down(static_cast<double>(exp_value) / (row_sum * static_cast<double>(rows)));
}

// One kv head's local keys as [head_dim][rows]: the logit loop then runs along contiguous keys.
std::vector<float> transposed_keys(const KeyRows& keys, const EstimatorShape& s, int kv_head) {
  const auto rows = keys.positions.size();
  const auto dim = static_cast<std::size_t>(s.head_dim);
  std::vector<float> out(rows * dim);
  for (std::size_t j = 0; j < rows; ++j) {
    const float* row =
        keys.k.data() + (j * static_cast<std::size_t>(s.kv_heads) + static_cast<std::size_t>(kv_head)) * dim;
    for (std::size_t e = 0; e < dim; ++e) out[e * rows + j] = row[e];
  }
  return out;
}

// Scaled logits of q head `h`'s observation rows against the local keys, -inf where the key is after
// the row. Each logit is the same fp32 sum in element order whatever the blocking, so the value of a
// (row, key) pair does not depend on which rank holds the key.
void head_logits(const EstimatorShape& s, std::span<const float> q, int h, Tokens window, Tokens first_row_position,
                 std::span<const float> keys_t, std::span<const Tokens> positions, float scale, float* out) {
  const auto n = static_cast<Tokens>(positions.size());
  const Tokens dim = s.head_dim;
  float acc[kKeyBlock];
  for (Tokens j0 = 0; j0 < n; j0 += kKeyBlock) {
    const Tokens count = std::min(kKeyBlock, n - j0);
    for (Tokens i = 0; i < window; ++i) {
      const float* qi = q.data() + (i * s.q_heads + h) * dim;
      std::fill(acc, acc + count, 0.0f);
      for (Tokens e = 0; e < dim; ++e) {
        const float qe = qi[e];
        const float* kr = keys_t.data() + e * n + j0;
        for (Tokens j = 0; j < count; ++j) acc[j] += qe * kr[j];
      }
      const Tokens row_position = first_row_position + i;
      float* row = out + i * n + j0;
      for (Tokens j = 0; j < count; ++j) {
        row[j] = positions[static_cast<std::size_t>(j0 + j)] <= row_position ? acc[j] * scale
                                                                             : -std::numeric_limits<float>::infinity();
      }
    }
  }
}

}  // namespace

void EstimatorShape::validate() const {
  if (q_heads < 1) fail("q_heads = {}: must be >= 1", q_heads);
  if (kv_heads < 1) fail("kv_heads = {}: must be >= 1", kv_heads);
  if (q_heads % kv_heads != 0) fail("q_heads = {}: must be a multiple of kv_heads ({})", q_heads, kv_heads);
  if (head_dim < 1) fail("head_dim = {}: must be >= 1", head_dim);
}

VerticalSlashEstimate estimate_vertical_slash(const EstimatorShape& shape, Tokens doc_len, std::span<const float> q_obs,
                                              const KeyRows& keys, const VerticalSlashOptions& options,
                                              EstimatorReduce& reduce) {
  shape.validate();
  if (doc_len < 1) fail("doc_len = {}: must be >= 1", doc_len);
  options.validate(doc_len);
  const Tokens window = options.window, first_row = doc_len - window, dim = shape.head_dim;
  const auto n = static_cast<Tokens>(keys.positions.size());
  const auto q_size = static_cast<std::size_t>(window * shape.q_heads * dim);
  if (keys.k.size() != static_cast<std::size_t>(n * shape.kv_heads * dim)) {
    fail("keys: {} values for {} rows of {} kv heads x {} dims", keys.k.size(), n, shape.kv_heads, dim);
  }
  for (const Tokens p : keys.positions) {
    if (p < 0 || p >= doc_len) fail("keys.positions: {} is outside the document [0, {})", p, doc_len);
  }
  if (!q_obs.empty() && q_obs.size() != q_size) {
    fail("q_obs: {} values, want {} (window {} x q_heads {} x head_dim {}) or none", q_obs.size(), q_size, window,
         shape.q_heads, dim);
  }

  // 1. The observation rows, from the last rank; every rank's logits against its own keys.
  std::vector<float> q(q_size, 0.0f);
  std::copy(q_obs.begin(), q_obs.end(), q.begin());
  reduce.broadcast_from_last(q);
  std::vector<std::vector<float>> keys_t(static_cast<std::size_t>(shape.kv_heads));
  for (int g = 0; g < shape.kv_heads; ++g) keys_t[static_cast<std::size_t>(g)] = transposed_keys(keys, shape, g);
  const int heads = shape.q_heads, group = shape.q_heads / shape.kv_heads;
  const auto head_cells = static_cast<std::size_t>(window * n);
  std::vector<float> buffer(static_cast<std::size_t>(heads) * head_cells);
  const auto scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dim)));
  const auto rows_of = [&](int h) { return buffer.data() + static_cast<std::size_t>(h) * head_cells; };
  std::vector<double> row_max(static_cast<std::size_t>(heads * window), -std::numeric_limits<double>::infinity());
#pragma omp parallel for schedule(dynamic)
  for (int h = 0; h < heads; ++h) {
    head_logits(shape, q, h, window, first_row, keys_t[static_cast<std::size_t>(h / group)], keys.positions, scale,
                rows_of(h));
    for (Tokens i = 0; i < window; ++i) {
      const float* row = rows_of(h) + i * n;
      double& m = row_max[static_cast<std::size_t>(h * window + i)];
      for (Tokens j = 0; j < n; ++j) m = std::max(m, static_cast<double>(row[j]));
    }
  }

  // 2. Global row maxima, then exp values (kept in place of the logits) and the global row sums.
  reduce.max(row_max);
  const RoundDown round_down(exp_sum_bits(doc_len));
  std::vector<double> row_sum(static_cast<std::size_t>(heads * window) + 1, 0.0);
  row_sum.back() = static_cast<double>(n);  // the key count: every position must be held once
#pragma omp parallel for schedule(dynamic)
  for (int h = 0; h < heads; ++h) {
    for (Tokens i = 0; i < window; ++i) {
      float* row = rows_of(h) + i * n;
      const double m = row_max[static_cast<std::size_t>(h * window + i)];
      double sum = 0.0;
      for (Tokens j = 0; j < n; ++j) {
        row[j] = static_cast<float>(std::exp(static_cast<double>(row[j]) - m));
        sum += round_down(static_cast<double>(row[j]));
      }
      row_sum[static_cast<std::size_t>(h * window + i)] = sum;
    }
  }
  reduce.sum(row_sum);
  if (row_sum.back() != static_cast<double>(doc_len)) {
    fail("keys: the ranks hold {} key rows in all; the document has {} positions, each to be held once", row_sum.back(),
         doc_len);
  }

  // 3. Token-level scores: [head][vertical | slash][doc_len].
  const auto len = static_cast<std::size_t>(doc_len);
  std::vector<double> scores(static_cast<std::size_t>(heads) * 2 * len, 0.0);
#pragma omp parallel for schedule(dynamic)
  for (int h = 0; h < heads; ++h) {
    double* vertical = scores.data() + static_cast<std::size_t>(h) * 2 * len;
    double* slash = vertical + len;
    for (Tokens i = 0; i < window; ++i) {
      const float* row = rows_of(h) + i * n;
      const double sum = row_sum[static_cast<std::size_t>(h * window + i)];
      for (Tokens j = 0; j < n; ++j) {
        if (row[j] == 0.0f) continue;
        const double a = mass(row[j], sum, window);
        const Tokens k = keys.positions[static_cast<std::size_t>(j)];
        vertical[k] += a;
        slash[first_row + i - k] += a;
      }
    }
  }
  reduce.sum(scores);

  // 4.-5. The same index on every rank; then the mass it keeps.
  VerticalSlashEstimate out;
  out.heads.resize(static_cast<std::size_t>(heads));
  out.scores.resize(static_cast<std::size_t>(heads));
  std::vector<double> kept(static_cast<std::size_t>(heads), 0.0);
#pragma omp parallel for schedule(dynamic)
  for (int h = 0; h < heads; ++h) {
    auto& sc = out.scores[static_cast<std::size_t>(h)];
    const double* vertical = scores.data() + static_cast<std::size_t>(h) * 2 * len;
    sc.vertical.assign(vertical, vertical + len);
    sc.slash.assign(vertical + len, vertical + 2 * len);
    auto& index = out.heads[static_cast<std::size_t>(h)];
    index = index_from_scores(sc, options);
    const Tokens g = options.block;
    std::vector<char> diagonal(static_cast<std::size_t>((doc_len + g - 1) / g + 1), 0), column(len, 0);
    for (const Tokens o : index.block_offsets) diagonal[static_cast<std::size_t>(o)] = 1;
    for (const Tokens k : index.verticals) column[static_cast<std::size_t>(k)] = 1;
    double sum_kept = 0.0;
    for (Tokens i = 0; i < window; ++i) {
      const float* row = rows_of(h) + i * n;
      const double sum = row_sum[static_cast<std::size_t>(h * window + i)];
      const Tokens qb = (first_row + i) / g;
      for (Tokens j = 0; j < n; ++j) {
        if (row[j] == 0.0f) continue;
        const Tokens k = keys.positions[static_cast<std::size_t>(j)];
        if (diagonal[static_cast<std::size_t>(qb - k / g)] || column[static_cast<std::size_t>(k)]) {
          sum_kept += mass(row[j], sum, window);
        }
      }
    }
    kept[static_cast<std::size_t>(h)] = sum_kept;
  }
  reduce.sum(kept);
  for (int h = 0; h < heads; ++h) out.heads[static_cast<std::size_t>(h)].recall = kept[static_cast<std::size_t>(h)];
  return out;
}

}  // namespace fulcrum::sparse
