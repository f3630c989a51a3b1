// Random attention problems for the kernel tests: documents laid out in shared Q/K/V buffers (with
// unnamed padding rows), each document's queries cut into tasks (single ranges and head+tail pairs,
// several tasks sharing the same key rows), under every mask kind. Test-only.
#pragma once

#include "fulcrum/core/random.hpp"
#include "fulcrum/kernels/attention.hpp"
#include "fulcrum/kernels/reference.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

namespace fulcrum::kernels::testing {

/// Vertical columns of a vertical-slash mask: up to one in 8 keys, so that long documents hold several
/// 64-column chunks of gathered columns (kernels/columns.hpp) and short ones a few columns.
inline void add_columns(Rng& rng, Tokens len, std::vector<Tokens>& verticals) {
  for (auto n = rng.uniform_int(1, std::max<Tokens>(6, len / 8)); n > 0; --n) {
    verticals.push_back(rng.uniform_int(0, std::max<Tokens>(0, len - 1)));
  }
}

/// A random mask of `kind` sized for a document of about `len` tokens, valid for a document of exactly
/// `len` tokens (a striped mask's ranks x block divides it). The switch has no default, so a new
/// MaskKind does not compile here until it has a case (-Wswitch is an error).
inline MaskSpec random_mask(Rng& rng, MaskKind kind, Tokens len) {
  const Tokens w = std::max<Tokens>(1, rng.uniform_int(1, std::max<Tokens>(1, len / 2)));
  switch (kind) {
    case MaskKind::kCausal: return MaskSpec::causal();
    case MaskKind::kFull: return MaskSpec::full();
    case MaskKind::kSlidingWindow: return MaskSpec::sliding_window(w);
    case MaskKind::kLambda: return MaskSpec::lambda(rng.uniform_int(0, 70), w);
    case MaskKind::kCausalBlockwise: return MaskSpec::causal_blockwise(rng.uniform_int(16, 100), rng.uniform_int(0, 2));
    case MaskKind::kSharedQuestion: return MaskSpec::shared_question(rng.uniform_int(1, 4), 20);
    case MaskKind::kVerticalSlash: {
      std::vector<Tokens> verticals, slashes;
      add_columns(rng, len, verticals);
      slashes.push_back(0);
      for (int i = 0; i < 5; ++i) slashes.push_back(rng.uniform_int(1, std::max<Tokens>(1, len)));
      return MaskSpec::vertical_slash(verticals, slashes);
    }
    case MaskKind::kBlockSparse: {
      std::vector<std::pair<Tokens, Tokens>> blocks;
      const Tokens block = 32;
      for (Tokens qb = 0; qb * block < len; ++qb) {
        for (Tokens kb = 0; kb <= qb; ++kb) {
          if (kb == 0 || kb == qb || rng.uniform() < 0.3) blocks.emplace_back(qb, kb);
        }
      }
      return MaskSpec::block_sparse(block, blocks);
    }
    case MaskKind::kVerticalSlashBlocks: {
      const Tokens block = std::vector<Tokens>{4, 16, 64}[static_cast<std::size_t>(rng.uniform_int(0, 2))];
      std::vector<Tokens> verticals, offsets = {0};
      add_columns(rng, len, verticals);
      for (int i = 0; i < 3; ++i) offsets.push_back(rng.uniform_int(1, std::max<Tokens>(1, len / block)));
      return MaskSpec::vertical_slash_blocks(block, verticals, offsets);
    }
    case MaskKind::kStriped: {
      std::vector<std::pair<int, Tokens>> layouts;  // (ranks, block) whose product divides len
      for (int ranks : {1, 2, 3, 4, 8}) {
        for (Tokens block : {1, 2, 4, 16}) {
          if (len % (ranks * block) == 0) layouts.emplace_back(ranks, block);
        }
      }
      const auto [ranks, block] = layouts[static_cast<std::size_t>(rng.uniform_int(0, std::ssize(layouts) - 1))];
      const MaskKind inner = rng.uniform() < 0.7 ? MaskKind::kVerticalSlashBlocks : MaskKind::kSlidingWindow;
      return MaskSpec::striped(random_mask(rng, inner, len), ranks, block);
    }
  }
  return MaskSpec::causal();
}

/// Vertical-slash masks with hundreds of columns for a document of `len` tokens (a multiple of 64):
/// blockified, token-level, and blockified under a block-striped and a token-striped layout, so the
/// kernels' gathered columns (kernels/columns.hpp) span several 64-column chunks.
inline std::vector<MaskSpec> many_column_masks(Rng& rng, Tokens len) {
  auto columns = [&](int n) {
    std::vector<Tokens> v(static_cast<std::size_t>(n));
    for (auto& c : v) c = rng.uniform_int(0, len - 1);
    return v;
  };
  return {MaskSpec::vertical_slash_blocks(64, columns(300), {0, 3, 9}),
          MaskSpec::vertical_slash(columns(250), {0, 1, 17, 200}),
          MaskSpec::striped(MaskSpec::vertical_slash_blocks(16, columns(200), {0, 2, 7}), 4, 16),
          MaskSpec::striped(MaskSpec::vertical_slash_blocks(64, columns(150), {0, 1}), 4, 1)};
}

/// One mask of every kind of the mask table (workload/mask.hpp), in its order, sized for a document of
/// about `len` tokens.
inline std::vector<MaskSpec> every_mask(Rng& rng, Tokens len) {
  std::vector<MaskSpec> masks;
  for (MaskKind kind : all_mask_kinds()) masks.push_back(random_mask(rng, kind, len));
  return masks;
}

/// How many mask kinds there are: test suites instantiated once per kind use it.
inline int mask_kind_count() { return static_cast<int>(all_mask_kinds().size()); }

struct Problem {
  AttentionShape shape;
  std::vector<AttentionTask> tasks;
  Tokens q_rows = 0, kv_rows = 0;
  std::vector<double> q, k, v, d_o;  // token-major, fp64 (values exactly representable as bf16 when asked)
  std::shared_ptr<const std::vector<MaskSpec>> head_masks;  // what the tasks' head_masks view, if any
};

/// Gives every q head its own mask drawn from `masks` (so heads of one call mix mask kinds) and cuts
/// every task into 1..3 tasks over disjoint head ranges that share its query and key rows. With
/// `drop_one`, one head range of one task is left out: those (row, head) cells must stay untouched.
inline void split_heads(Rng& rng, Problem& p, const std::vector<MaskSpec>& masks, bool drop_one) {
  const int hq = p.shape.q_heads;
  auto per_head = std::make_shared<std::vector<MaskSpec>>();
  // Only masks every document accepts (a striped mask drawn for another length may not).
  std::vector<MaskSpec> usable;
  for (const auto& m : masks) {
    const bool fits = std::all_of(p.tasks.begin(), p.tasks.end(),
                                  [&](const AttentionTask& t) { return t.doc_len % m.length_multiple() == 0; });
    if (fits) usable.push_back(m);
  }
  const auto n_masks = static_cast<std::int64_t>(usable.size());
  for (int h = 0; h < hq; ++h) per_head->push_back(usable[static_cast<std::size_t>(rng.uniform_int(0, n_masks - 1))]);
  p.head_masks = per_head;
  std::vector<AttentionTask> out;
  for (const auto& task : p.tasks) {
    std::vector<int> cuts = {0, hq};
    for (int i = static_cast<int>(rng.uniform_int(0, 2)); i > 0; --i) {
      cuts.push_back(static_cast<int>(rng.uniform_int(1, hq)));
    }
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    for (std::size_t c = 0; c + 1 < cuts.size(); ++c) {
      AttentionTask part = task;
      part.head_masks = *per_head;
      // A range over every head stays "all" now and then, as planners that do not cut heads write it.
      part.heads = cuts.size() == 2 && rng.uniform() < 0.5 ? HeadRange{} : HeadRange{cuts[c], cuts[c + 1]};
      out.push_back(part);
    }
  }
  if (drop_one && out.size() > 1) {
    out.erase(out.begin() + rng.uniform_int(0, static_cast<std::int64_t>(out.size()) - 1));
  }
  p.tasks = std::move(out);
}

/// Documents of the given lengths (each rounded up to a length `mask` accepts), one after the other in
/// the buffers with `pad` unused rows between them. Each document's query rows are cut into 1..max_tasks tasks (some
/// head+tail pairs) that all read the document's key range [key_begin, len) with key_begin random when `partial_keys`.
inline Problem make_problem(Rng& rng, AttentionShape shape, const std::vector<Tokens>& lengths, const MaskSpec& mask,
                            int max_tasks, bool partial_keys, bool bf16_values) {
  Problem p;
  p.shape = shape;
  Tokens row = 0;
  for (Tokens len : lengths) {
    len = (len + mask.length_multiple() - 1) / mask.length_multiple() * mask.length_multiple();
    row += rng.uniform_int(0, 3);  // padding rows nobody names
    const Tokens key_begin = partial_keys ? rng.uniform_int(0, len / 3) : 0;
    std::vector<Tokens> cuts = {0, len};
    const int pieces = static_cast<int>(rng.uniform_int(1, max_tasks));
    for (int i = 1; i < pieces; ++i) cuts.push_back(rng.uniform_int(0, len));
    std::sort(cuts.begin(), cuts.end());
    std::vector<RowSpan> ranges;
    for (std::size_t i = 0; i + 1 < cuts.size(); ++i) {
      if (cuts[i + 1] > cuts[i]) ranges.push_back({row + cuts[i], cuts[i], cuts[i + 1] - cuts[i]});
    }
    // Pair the first and last pieces as one head+tail task, as DistCA's shards do.
    while (!ranges.empty()) {
      AttentionTask task{{0, {ranges.front(), RowSpan{}}, {row + key_begin, key_begin, len - key_begin}}, len, mask};
      ranges.erase(ranges.begin());
      if (!ranges.empty() && rng.uniform() < 0.5) {
        task.queries[1] = ranges.back();
        ranges.pop_back();
      }
      p.tasks.push_back(task);
    }
    row += len;
  }
  p.q_rows = p.kv_rows = row + rng.uniform_int(0, 2);
  auto fill = [&](std::vector<double>& x, Tokens rows, int heads) {
    x.resize(static_cast<std::size_t>(rows * heads * shape.head_dim));
    for (auto& value : x) {
      value = rng.normal();
      if (bf16_values) value = to_float(to_bf16(static_cast<float>(value)));
    }
  };
  fill(p.q, p.q_rows, shape.q_heads);
  fill(p.k, p.kv_rows, shape.kv_heads);
  fill(p.v, p.kv_rows, shape.kv_heads);
  fill(p.d_o, p.q_rows, shape.q_heads);
  return p;
}

template <class T>
std::vector<T> stored(const std::vector<double>& x) {
  std::vector<T> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = from_float<T>(static_cast<float>(x[i]));
  return out;
}

template <class T>
HeadTensor<T> view(std::vector<T>& x, Tokens rows, int heads, int dim) {
  return {x.data(), rows, heads, dim};
}

/// The kernels' outputs as fp32.
struct Outputs {
  std::vector<float> o, lse, dq, dk, dv;
};

/// Forward, then (with `backward`) backward on the forward's own O and LSE, over fresh T copies of the
/// problem's inputs; O and LSE start at the sentinel 7 (cells no task names must keep it).
template <class T>
Outputs run_kernels(const Problem& p, bool backward) {
  const auto& s = p.shape;
  auto q = testing::stored<T>(p.q), k = testing::stored<T>(p.k), v = testing::stored<T>(p.v);
  auto d_o = testing::stored<T>(p.d_o);
  std::vector<T> o(p.q.size(), from_float<T>(7.0f));  // sentinel: rows no task names must keep it
  Outputs out;
  out.lse.assign(static_cast<std::size_t>(p.q_rows * s.q_heads), 7.0f);
  attention_forward<T>(
      p.tasks, s, testing::view(q, p.q_rows, s.q_heads, s.head_dim),
      testing::view(k, p.kv_rows, s.kv_heads, s.head_dim), testing::view(v, p.kv_rows, s.kv_heads, s.head_dim),
      testing::view(o, p.q_rows, s.q_heads, s.head_dim), testing::view(out.lse, p.q_rows, s.q_heads, 1));
  for (auto x : o) out.o.push_back(to_float(x));
  if (!backward) return out;
  out.dq.assign(p.q.size(), 0.0f);
  out.dk.assign(p.k.size(), 0.0f);
  out.dv.assign(p.v.size(), 0.0f);
  attention_backward<T>(
      p.tasks, s, testing::view(q, p.q_rows, s.q_heads, s.head_dim),
      testing::view(k, p.kv_rows, s.kv_heads, s.head_dim), testing::view(v, p.kv_rows, s.kv_heads, s.head_dim),
      testing::view(o, p.q_rows, s.q_heads, s.head_dim), testing::view(d_o, p.q_rows, s.q_heads, s.head_dim),
      HeadTensor<const float>{out.lse.data(), p.q_rows, s.q_heads, 1},
      testing::view(out.dq, p.q_rows, s.q_heads, s.head_dim), testing::view(out.dk, p.kv_rows, s.kv_heads, s.head_dim),
      testing::view(out.dv, p.kv_rows, s.kv_heads, s.head_dim));
  return out;
}

/// max |got - want| / max |want| over the elements where want is finite: the error relative to the
/// tensor's scale (elementwise relative error is meaningless for near-zero entries).
template <class A, class B>
double relative_error(const std::vector<A>& got, const std::vector<B>& want) {
  double worst = 0, scale = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double w = static_cast<double>(want[i]);
    if (!std::isfinite(w)) continue;
    scale = std::max(scale, std::abs(w));
    worst = std::max(worst, std::abs(static_cast<double>(to_float(got[i])) - w));
  }
  return scale == 0 ? worst : worst / scale;
}

/// (row, head) cells named by the problem's tasks (their rows, their heads), as [row][head] cells.
inline std::vector<char> named_cells(const Problem& p) {
  const int hq = p.shape.q_heads;
  std::vector<char> named(static_cast<std::size_t>(p.q_rows * hq), 0);
  for (const auto& t : p.tasks) {
    for (const auto& r : t.queries) {
      for (Tokens i = 0; i < r.count; ++i) {
        for (int h = t.heads.first(); h < t.heads.last(hq); ++h) {
          named[static_cast<std::size_t>((r.row + i) * hq + h)] = 1;
        }
      }
    }
  }
  return named;
}

}  // namespace fulcrum::kernels::testing
