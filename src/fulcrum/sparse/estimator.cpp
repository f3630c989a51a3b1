#include "fulcrum/sparse/estimator.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/core/simd.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>

#include <sys/mman.h>

namespace fulcrum::sparse {
namespace {

using simd::IVec;
using simd::kLanes;
using simd::kNegInf;
using simd::load;
using simd::splat;
using simd::store;
using simd::Vec;

// 8 int64 lanes (one 64-byte register; a Vec's values make two): values as integer multiples of a power
// of two. Integer sums are exact in any order, which is what keeps the index identical over any split of
// the keys.
using Units = std::int64_t __attribute__((vector_size(64)));
constexpr Tokens kUnitLanes = 8;

// The work is key-major: one key's values for all observation rows are one column of vectors, the rows
// padded with zeros (masked to -inf) to whole blocks of kRowBlock. Every element goes through the same
// vector instructions, whichever rank holds the key: there is no scalar remainder.
constexpr Tokens kRowBlock = 64;
// Entries of A are rounded down to multiples of 2^-50: all of them sum to at most 1, so every sum of
// them is an integer number of units below 2^53, exact in int64 and in fp64.
constexpr int kMassBits = 50;

// Row sums add doc_len exp values <= 1, each rounded down to a multiple of 2^-bits: exact in fp64 (the
// collective's type) while doc_len < 2^(53 - bits).
int exp_sum_bits(Tokens doc_len) { return 52 - static_cast<int>(std::bit_width(static_cast<std::uint64_t>(doc_len))); }

// floor(values * scale) for values * scale in [0, 2^62] (truncation is the floor of a non-negative
// value), lanes 0-7 into out[0] and 8-15 into out[1].
FULCRUM_INLINE void floor_units(Vec values, Vec scale, Units* out) {
  const Vec x = values * scale;
  out[0] = __builtin_convertvector(__builtin_shufflevector(x, x, 0, 1, 2, 3, 4, 5, 6, 7), Units);
  out[1] = __builtin_convertvector(__builtin_shufflevector(x, x, 8, 9, 10, 11, 12, 13, 14, 15), Units);
}

FULCRUM_INLINE Units load_units(const std::int64_t* p) {
  Units u;
  std::memcpy(&u, p, sizeof u);
  return u;
}
FULCRUM_INLINE void store_units(std::int64_t* p, Units u) { std::memcpy(p, &u, sizeof u); }
FULCRUM_INLINE std::int64_t lane_sum(Units u) {
  std::int64_t sum = 0;
  for (Tokens l = 0; l < kUnitLanes; ++l) sum += u[l];
  return sum;
}

// The logit/exp buffer (heads x keys x rows floats, 64 MB for 2 heads at 128K). Faulting in fresh
// pages cost several times the logit product itself (measured at 128K: about 180 ms of page faults
// against 20 ms of FMAs where no huge page was to be had), and the estimator runs every step, so the
// calling thread keeps its buffer for the next call: it grows to the largest call's size and is freed
// when the thread ends. Aligned to 2 MB and marked for transparent huge pages where the kernel offers
// them. Written in full by the logit pass before anything reads it, so it is never zeroed.
struct FreeDeleter {
  void operator()(float* p) const { std::free(p); }
};
float* thread_workspace(std::size_t count) {
  constexpr std::size_t kHugePage = std::size_t{1} << 21;
  thread_local std::unique_ptr<float[], FreeDeleter> buffer;
  thread_local std::size_t capacity = 0;  // floats
  if (count <= capacity) return buffer.get();
  const std::size_t bytes = std::max<std::size_t>((count * sizeof(float) + kHugePage - 1) / kHugePage, 1) * kHugePage;
  buffer.reset();  // the old buffer first: the two need not fit together
  capacity = 0;
  auto* p = static_cast<float*>(std::aligned_alloc(kHugePage, bytes));
  if (p == nullptr) fail_runtime("out of memory for the estimator's {} MB buffer", bytes >> 20);
#ifdef MADV_HUGEPAGE
  madvise(p, bytes, MADV_HUGEPAGE);  // a hint: without huge pages the buffer still works
#endif
  buffer.reset(p);
  capacity = bytes / sizeof(float);
  return p;
}

// Q^T of one q head: [head_dim][rows], rows past the window zero.
std::vector<float> transposed_q(const std::vector<float>& q, const EstimatorShape& s, int h, Tokens window,
                                Tokens rows) {
  std::vector<float> out(static_cast<std::size_t>(s.head_dim * rows), 0.0f);
  for (Tokens i = 0; i < window; ++i) {
    for (Tokens e = 0; e < s.head_dim; ++e) {
      out[static_cast<std::size_t>(e * rows + i)] = q[static_cast<std::size_t>((i * s.q_heads + h) * s.head_dim + e)];
    }
  }
  return out;
}

#define FULCRUM_ISA_INCLUDE "fulcrum/sparse/estimator_logits-inl.hpp"
#include "fulcrum/core/simd_foreach_isa.hpp"

// Fails naming the field unless the inputs are one document's observation rows (or none) and a set of
// its keys.
void validate_inputs(const EstimatorShape& shape, Tokens doc_len, std::span<const float> q_obs, const KeyRows& keys,
                     const VerticalSlashOptions& options) {
  shape.validate();
  if (doc_len < 1) fail("doc_len = {}: must be >= 1", doc_len);
  options.validate(doc_len);
  const Tokens window = options.window, dim = shape.head_dim;
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
}

// What every pass of one estimate shares: the sizes, and the logit buffer the first pass fills and the
// later ones stream. Per q head the buffer holds the local keys' columns (key-major), each of `rows`
// floats: the window padded to whole row blocks.
struct Estimation {
  const EstimatorShape& shape;
  const KeyRows& keys;
  Tokens window = 0, first_row = 0;
  Tokens n = 0;  // local keys
  int heads = 0;
  Tokens rows = 0, row_vecs = 0, row_units = 0;
  std::size_t head_cells = 0;  // one q head's part of the buffer
  float* buffer = nullptr;

  Estimation(const EstimatorShape& s, Tokens doc_len, const KeyRows& k, Tokens w)
      : shape(s),
        keys(k),
        window(w),
        first_row(doc_len - w),
        n(static_cast<Tokens>(k.positions.size())),
        heads(s.q_heads),
        rows((w + kRowBlock - 1) / kRowBlock * kRowBlock),
        row_vecs(rows / kLanes),
        row_units(rows / kUnitLanes),
        head_cells(static_cast<std::size_t>(n * rows)),
        buffer(thread_workspace(static_cast<std::size_t>(heads) * head_cells)) {}

  [[nodiscard]] float* keys_of(int h) const { return buffer + static_cast<std::size_t>(h) * head_cells; }
};

// 1. Every q head's logits against the local keys, into the buffer. Returns each observation row's
// local maximum, [head][window].
std::vector<double> observation_logits(const Estimation& e, const std::vector<float>& q) {
  const int heads = e.heads;
  const Tokens window = e.window, rows = e.rows;
  const auto scale = static_cast<float>(1.0 / (std::sqrt(static_cast<double>(e.shape.head_dim)) * std::log(2.0)));
  std::vector<double> row_max(static_cast<std::size_t>(heads * window));
  const simd::Isa isa = simd::active_isa();
#pragma omp parallel for schedule(dynamic)
  for (int h = 0; h < heads; ++h) {
    const std::vector<float> qt = transposed_q(q, e.shape, h, window, rows);
    FULCRUM_DISPATCH(isa, head_logits(e.shape, e.keys, h, qt, window, rows, e.first_row, scale, e.keys_of(h),
                                      row_max.data() + static_cast<std::size_t>(h * window)));
  }
  return row_max;
}

// 2. Every logit becomes its exp value against the global row maximum, in place. Returns the local row
// sums, [head][window], then the local key count: each exp value rounded down to a multiple of
// 2^-sum_bits and added as integer units, so the sums over ranks are exact.
std::vector<double> exp_row_sums(const Estimation& e, const std::vector<double>& row_max, int sum_bits) {
  const int heads = e.heads;
  const Tokens window = e.window, n = e.n, rows = e.rows, row_vecs = e.row_vecs, row_units = e.row_units;
  std::vector<double> row_sum(static_cast<std::size_t>(heads * window) + 1, 0.0);
  row_sum.back() = static_cast<double>(n);  // the key count: every position must be held once
#pragma omp parallel for schedule(dynamic)
  for (int h = 0; h < heads; ++h) {
    std::vector<float> maxima(static_cast<std::size_t>(rows), 0.0f);  // padding rows are all -inf: any finite value
    for (Tokens i = 0; i < window; ++i) {
      maxima[static_cast<std::size_t>(i)] = static_cast<float>(row_max[static_cast<std::size_t>(h * window + i)]);
    }
    std::vector<Units> sums(static_cast<std::size_t>(row_units), Units{});
    const Vec units = splat<Vec>(std::ldexp(1.0f, sum_bits));
    for (Tokens j = 0; j < n; ++j) {
      float* column = e.keys_of(h) + j * rows;
      for (Tokens v = 0; v < row_vecs; ++v) {
        const Vec x = simd::exp2_bounded(load<Vec>(column + v * kLanes) - load<Vec>(maxima.data() + v * kLanes));
        store(column + v * kLanes, x);
        Units u[2];
        floor_units(x, units, u);
        sums[static_cast<std::size_t>(2 * v)] += u[0];
        sums[static_cast<std::size_t>(2 * v + 1)] += u[1];
      }
    }
    for (Tokens i = 0; i < window; ++i) {
      row_sum[static_cast<std::size_t>(h * window + i)] =
          std::ldexp(static_cast<double>(sums[static_cast<std::size_t>(i / kUnitLanes)][i % kUnitLanes]), -sum_bits);
    }
  }
  return row_sum;
}

double to_mass(std::int64_t units) { return std::ldexp(static_cast<double>(units), -kMassBits); }

// The entries of A, from the exp values in the buffer and the global row sums. An entry is in units of
// 2^-50: floor(exp value x factor), an fp32 product, with the row's factor 2^50 / (row sum x window)
// rounded to fp32 once per row from the global sum, so it is the same on every rank; zero on padding rows.
class AttentionMass {
 public:
  AttentionMass(const Estimation& e, const std::vector<double>& row_sum)
      : e_(e), factor_(static_cast<std::size_t>(e.heads * e.rows), 0.0f) {
    const Tokens window = e.window, rows = e.rows;
    for (int h = 0; h < e.heads; ++h) {
      for (Tokens i = 0; i < window; ++i) {
        factor_[static_cast<std::size_t>(h * rows + i)] =
            static_cast<float>(std::ldexp(1.0, kMassBits) /
                               (row_sum[static_cast<std::size_t>(h * window + i)] * static_cast<double>(window)));
      }
    }
  }

  // Key j's entries of A for every row of head h, in units: row_units vectors into `out`.
  void units(int h, Tokens j, Units* out) const {
    const Tokens rows = e_.rows, row_vecs = e_.row_vecs;
    const float* column = e_.keys_of(h) + j * rows;
    const float* factor = factor_.data() + static_cast<std::size_t>(h * rows);
    for (Tokens v = 0; v < row_vecs; ++v)
      floor_units(load<Vec>(column + v * kLanes), load<Vec>(factor + v * kLanes), out + 2 * v);
  }

 private:
  const Estimation& e_;
  std::vector<float> factor_;  // [head][rows]
};

// 3. The local keys' token-level scores, [head][vertical | slash][doc_len]. Key k's entries add to
// vertical[k] and, row i to slash[first_row + i - k]: a contiguous run of slash entries, whatever the
// positions.
std::vector<double> token_scores(const Estimation& e, const AttentionMass& mass, Tokens doc_len) {
  const int heads = e.heads;
  const Tokens n = e.n, rows = e.rows, row_units = e.row_units, first_row = e.first_row;
  const auto len = static_cast<std::size_t>(doc_len);
  std::vector<double> scores(static_cast<std::size_t>(heads) * 2 * len, 0.0);
#pragma omp parallel for schedule(dynamic)
  for (int h = 0; h < heads; ++h) {
    std::vector<std::int64_t> vertical(len, 0);
    // slash[d] at d + rows. A row before its key (d < 0) lands below `rows`, a padding row may land past
    // doc_len + rows: both add zero mass.
    std::vector<std::int64_t> slash(len + 2 * static_cast<std::size_t>(rows), 0);
    std::vector<Units> a(static_cast<std::size_t>(row_units));
    for (Tokens j = 0; j < n; ++j) {
      const Tokens k = e.keys.positions[static_cast<std::size_t>(j)];
      std::int64_t* diagonal = slash.data() + (first_row - k + rows);
      mass.units(h, j, a.data());
      Units total{};
      for (Tokens u = 0; u < row_units; ++u) {
        const Units& au = a[static_cast<std::size_t>(u)];
        total += au;
        store_units(diagonal + u * kUnitLanes, load_units(diagonal + u * kUnitLanes) + au);
      }
      vertical[static_cast<std::size_t>(k)] += lane_sum(total);
    }
    double* out = scores.data() + static_cast<std::size_t>(h) * 2 * len;
    for (std::size_t t = 0; t < len; ++t) {
      out[t] = to_mass(vertical[t]);
      out[len + t] = to_mass(slash[t + static_cast<std::size_t>(rows)]);
    }
  }
  return scores;
}

// The observation rows of one query block: the rows of a block keep the same key blocks, so per key the
// kept rows are the union of whole groups of rows.
struct RowGroup {
  Tokens query_block;
  std::vector<Units> lanes;  // all ones on the group's rows
};

std::vector<RowGroup> row_groups(const Estimation& e, Tokens g) {
  std::vector<RowGroup> groups;
  for (Tokens i = 0; i < e.window; ++i) {
    const Tokens qb = (e.first_row + i) / g;
    if (groups.empty() || groups.back().query_block != qb) {
      groups.push_back({qb, std::vector<Units>(static_cast<std::size_t>(e.row_units), Units{})});
    }
    groups.back().lanes[static_cast<std::size_t>(i / kUnitLanes)][i % kUnitLanes] = -1;
  }
  return groups;
}

// 5. The mass of A in head h's local keys that `index` keeps, in units: a key's whole column where it is
// a vertical, else the rows whose query block is on one of the index's block diagonals from the key's.
std::int64_t kept_units(const Estimation& e, const AttentionMass& mass, const std::vector<RowGroup>& groups,
                        const VerticalSlashIndex& index, int h, Tokens doc_len, Tokens g) {
  const auto len = static_cast<std::size_t>(doc_len);
  std::vector<char> diagonal(static_cast<std::size_t>((doc_len + g - 1) / g + 1), 0), column(len, 0);
  for (const Tokens o : index.block_offsets) diagonal[static_cast<std::size_t>(o)] = 1;
  for (const Tokens k : index.verticals) column[static_cast<std::size_t>(k)] = 1;
  // The rows a key's block keeps through the diagonals, rebuilt when the block changes.
  const auto units = static_cast<std::size_t>(e.row_units);
  std::vector<Units> block_rows(units), sum(units, Units{}), a(units);
  Tokens rows_block = -1;
  const Units all_rows = Units{} - 1;
  for (Tokens j = 0; j < e.n; ++j) {
    const Tokens k = e.keys.positions[static_cast<std::size_t>(j)], kb = k / g;
    if (kb != rows_block) {
      std::fill(block_rows.begin(), block_rows.end(), Units{});
      // A group's block before the key's (a negative offset) holds rows before the key: zero mass.
      for (const auto& group : groups) {
        if (group.query_block < kb || diagonal[static_cast<std::size_t>(group.query_block - kb)] == 0) continue;
        for (std::size_t u = 0; u < units; ++u) block_rows[u] |= group.lanes[u];
      }
      rows_block = kb;
    }
    const bool vertical = column[static_cast<std::size_t>(k)] != 0;
    mass.units(h, j, a.data());
    for (std::size_t u = 0; u < units; ++u) sum[u] += a[u] & (vertical ? all_rows : block_rows[u]);
  }
  std::int64_t kept = 0;
  for (const Units& u : sum) kept += lane_sum(u);
  return kept;
}

// 4.-5. Every head's index from the global scores, so the same on every rank; then the mass it keeps of
// the local keys' entries of A, into `kept` ([head]), for the caller to sum over the ranks.
VerticalSlashEstimate select_indices(const Estimation& e, const AttentionMass& mass, const std::vector<double>& scores,
                                     Tokens doc_len, const VerticalSlashOptions& options, std::vector<double>& kept) {
  const int heads = e.heads;
  const auto len = static_cast<std::size_t>(doc_len);
  VerticalSlashEstimate out;
  out.heads.resize(static_cast<std::size_t>(heads));
  out.scores.resize(static_cast<std::size_t>(heads));
  const std::vector<RowGroup> groups = row_groups(e, options.block);
#pragma omp parallel for schedule(dynamic)
  for (int h = 0; h < heads; ++h) {
    auto& sc = out.scores[static_cast<std::size_t>(h)];
    const double* score = scores.data() + static_cast<std::size_t>(h) * 2 * len;
    sc.vertical.assign(score, score + len);
    sc.slash.assign(score + len, score + 2 * len);
    auto& index = out.heads[static_cast<std::size_t>(h)];
    index = index_from_scores(sc, options);
    kept[static_cast<std::size_t>(h)] = to_mass(kept_units(e, mass, groups, index, h, doc_len, options.block));
  }
  return out;
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
  validate_inputs(shape, doc_len, q_obs, keys, options);

  // 1. The observation rows, from the last rank; every rank's logits against its own keys.
  std::vector<float> q(static_cast<std::size_t>(options.window * shape.q_heads * shape.head_dim), 0.0f);
  std::copy(q_obs.begin(), q_obs.end(), q.begin());
  reduce.broadcast_from_last(q);
  const Estimation e(shape, doc_len, keys, options.window);
  std::vector<double> row_max = observation_logits(e, q);

  // 2. Global row maxima, then exp values (kept in place of the logits) and the global row sums.
  reduce.max(row_max);
  const int sum_bits = exp_sum_bits(doc_len);
  std::vector<double> row_sum = exp_row_sums(e, row_max, sum_bits);
  reduce.sum(row_sum);
  if (row_sum.back() != static_cast<double>(doc_len)) {
    fail("keys: the ranks hold {} key rows in all; the document has {} positions, each to be held once", row_sum.back(),
         doc_len);
  }
  const AttentionMass mass(e, row_sum);

  // 3. Token-level scores, summed over the ranks.
  std::vector<double> scores = token_scores(e, mass, doc_len);
  reduce.sum(scores);

  // 4.-5. The same index on every rank; then the mass it keeps, summed over the ranks.
  std::vector<double> kept(static_cast<std::size_t>(e.heads), 0.0);
  VerticalSlashEstimate out = select_indices(e, mass, scores, doc_len, options, kept);
  reduce.sum(kept);
  for (int h = 0; h < e.heads; ++h) out.heads[static_cast<std::size_t>(h)].recall = kept[static_cast<std::size_t>(h)];
  return out;
}

}  // namespace fulcrum::sparse
