#include "fulcrum/kernels/reference.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/kernels/bf16.hpp"

#include <cmath>
#include <limits>

namespace fulcrum::kernels {
namespace {

// One implementation for both: Real is the arithmetic type, round() what each stored value goes
// through (nothing for fp64, bf16 rounding for the naive bf16 path).
template <class Real, class Round>
MaterialisedResult<Real> materialised(std::span<const AttentionTask> tasks, const AttentionShape& shape,
                                      std::span<const Real> q, std::span<const Real> k, std::span<const Real> v,
                                      std::span<const Real> d_o, Round round) {
  shape.validate();
  const int hq = shape.q_heads, hkv = shape.kv_heads, dim = shape.head_dim, group = hq / hkv;
  const auto q_cells = q.size() / static_cast<std::size_t>(dim);
  const Tokens q_rows = static_cast<Tokens>(q_cells / static_cast<std::size_t>(hq));
  const Tokens kv_rows = static_cast<Tokens>(k.size() / static_cast<std::size_t>(hkv * dim));
  if (v.size() != k.size()) fail("v: {} values, k has {}", v.size(), k.size());
  if (!d_o.empty() && d_o.size() != q.size()) fail("d_o: {} values, q has {}", d_o.size(), q.size());
  validate_tasks(tasks, q_rows, kv_rows, hq);
  const Real scale = static_cast<Real>(shape.softmax_scale());
  const bool backward = !d_o.empty();

  MaterialisedResult<Real> out;
  out.o.assign(q.size(), 0);
  out.lse.assign(q_cells, 0);
  if (backward) {
    out.dq.assign(q.size(), 0);
    out.dk.assign(k.size(), 0);
    out.dv.assign(v.size(), 0);
  }
  auto q_at = [&](Tokens row, int h) { return static_cast<std::size_t>((row * hq + h) * dim); };
  auto kv_at = [&](Tokens row, int g) { return static_cast<std::size_t>((row * hkv + g) * dim); };
  std::vector<Real> p, dp;
  std::vector<Tokens> visible;
  for (const auto& task : tasks) {
    for (const auto& range : task.queries) {
      for (Tokens i = 0; i < range.count; ++i) {
        const Tokens row = range.row + i, pos = range.position + i;
        for (int h = task.heads.first(); h < task.heads.last(hq); ++h) {
          visible.clear();
          for (Tokens j = 0; j < task.keys.count; ++j) {
            if (task.mask_of(h).allows(pos, task.keys.position + j, task.doc_len)) visible.push_back(task.keys.row + j);
          }
          const int g = h / group;
          const Real* qi = &q[q_at(row, h)];
          p.assign(visible.size(), 0);
          Real top = -std::numeric_limits<Real>::infinity();
          for (std::size_t j = 0; j < visible.size(); ++j) {
            Real dot = 0;
            for (int c = 0; c < dim; ++c) dot += qi[c] * k[kv_at(visible[j], g) + c];
            p[j] = round(dot * scale);
            top = std::max(top, p[j]);
          }
          Real sum = 0;
          for (auto& x : p) sum += (x = std::exp(x - top));
          out.lse[q_at(row, h) / dim] = visible.empty() ? -std::numeric_limits<Real>::infinity() : top + std::log(sum);
          for (auto& x : p) x = round(x / sum);
          Real* oi = &out.o[q_at(row, h)];
          for (std::size_t j = 0; j < visible.size(); ++j) {
            for (int c = 0; c < dim; ++c) oi[c] += p[j] * v[kv_at(visible[j], g) + c];
          }
          for (int c = 0; c < dim; ++c) oi[c] = round(oi[c]);
          if (!backward) continue;
          // dP = dO V^T, D = dO . O, dS = P (dP - D); dQ = scale dS K, dK = scale dS^T Q, dV = P^T dO.
          const Real* gi = &d_o[q_at(row, h)];
          Real delta = 0;
          for (int c = 0; c < dim; ++c) delta += gi[c] * oi[c];
          delta = round(delta);
          for (std::size_t j = 0; j < visible.size(); ++j) {
            const std::size_t kv = kv_at(visible[j], g);
            Real dpj = 0;
            for (int c = 0; c < dim; ++c) dpj += gi[c] * v[kv + c];
            const Real ds = round(p[j] * (round(dpj) - delta));
            for (int c = 0; c < dim; ++c) {
              out.dq[q_at(row, h) + c] += scale * ds * k[kv + c];
              out.dk[kv + c] += scale * ds * qi[c];
              out.dv[kv + c] += p[j] * gi[c];
            }
          }
        }
      }
    }
  }
  for (auto* grads : {&out.dq, &out.dk, &out.dv}) {
    for (auto& x : *grads) x = round(x);
  }
  return out;
}

}  // namespace

MaterialisedResult<double> reference_attention(std::span<const AttentionTask> tasks, const AttentionShape& shape,
                                               std::span<const double> q, std::span<const double> k,
                                               std::span<const double> v, std::span<const double> d_o) {
  return materialised<double>(tasks, shape, q, k, v, d_o, [](double x) { return x; });
}

MaterialisedResult<float> naive_bf16_attention(std::span<const AttentionTask> tasks, const AttentionShape& shape,
                                               std::span<const float> q, std::span<const float> k,
                                               std::span<const float> v, std::span<const float> d_o) {
  return materialised<float>(tasks, shape, q, k, v, d_o, [](float x) { return to_float(to_bf16(x)); });
}

}  // namespace fulcrum::kernels
