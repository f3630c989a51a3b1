#include "fulcrum/runtime/attention_data.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/core/random.hpp"
#include "fulcrum/kernels/attention.hpp"
#include "fulcrum/kernels/reference.hpp"

#include <cmath>
#include <map>

namespace fulcrum::runtime {
namespace {

// Document d's whole tensors, generated (values) or computed (outputs) in one process.
template <class Real>
struct WholeDocument {
  std::vector<Real> q, k, v, d_o;
  std::vector<Real> o, lse, dq, dk, dv;
};

template <class Real>
std::vector<Real> generate(std::uint64_t seed, Field field, const Document& doc, Tokens row_values) {
  std::vector<Real> out(static_cast<std::size_t>(doc.length * row_values));
  for (Tokens p = 0; p < doc.length; ++p) {
    for (Tokens e = 0; e < row_values; ++e) out[p * row_values + e] = token_value(seed, field, doc.id, p, e);
  }
  return out;
}

kernels::AttentionShape shape_of(const HeadLayout& h) {
  kernels::AttentionShape s;
  s.q_heads = h.q_heads;
  s.kv_heads = h.kv_heads;
  s.head_dim = h.head_dim;
  return s;
}

WholeDocument<double> reference_document(const HeadLayout& h, const Document& doc, std::uint64_t seed,
                                         ReferenceKind kind) {
  const std::vector<kernels::AttentionTask> tasks = {
      {{0, {RowSpan{0, 0, doc.length}, RowSpan{}}, {0, 0, doc.length}}, doc.length, doc.mask, doc.head_masks}};
  const auto shape = shape_of(h);
  WholeDocument<double> out;
  if (kind == ReferenceKind::kFp64) {
    out.q = generate<double>(seed, Field::kQ, doc, h.row_values(Field::kQ));
    out.k = generate<double>(seed, Field::kK, doc, h.row_values(Field::kK));
    out.v = generate<double>(seed, Field::kV, doc, h.row_values(Field::kV));
    out.d_o = generate<double>(seed, Field::kDO, doc, h.row_values(Field::kDO));
    auto r = kernels::reference_attention(tasks, shape, out.q, out.k, out.v, out.d_o);
    out.o = std::move(r.o);
    out.lse = std::move(r.lse);
    out.dq = std::move(r.dq);
    out.dk = std::move(r.dk);
    out.dv = std::move(r.dv);
    return out;
  }
  auto q = generate<float>(seed, Field::kQ, doc, h.row_values(Field::kQ));
  auto k = generate<float>(seed, Field::kK, doc, h.row_values(Field::kK));
  auto v = generate<float>(seed, Field::kV, doc, h.row_values(Field::kV));
  auto d_o = generate<float>(seed, Field::kDO, doc, h.row_values(Field::kDO));
  std::vector<float> o(q.size()), lse(static_cast<std::size_t>(doc.length * h.q_heads)), dq(q.size(), 0.0f),
      dk(k.size(), 0.0f), dv(v.size(), 0.0f);
  const Tokens n = doc.length;
  auto view = [&](auto& x, int heads, int dim) {
    return kernels::HeadTensor<std::remove_reference_t<decltype(x[0])>>{x.data(), n, heads, dim};
  };
  kernels::attention_forward<float>(tasks, shape, view(q, h.q_heads, h.head_dim), view(k, h.kv_heads, h.head_dim),
                                    view(v, h.kv_heads, h.head_dim), view(o, h.q_heads, h.head_dim),
                                    view(lse, h.q_heads, 1));
  kernels::attention_backward<float>(
      tasks, shape, view(q, h.q_heads, h.head_dim), view(k, h.kv_heads, h.head_dim), view(v, h.kv_heads, h.head_dim),
      view(o, h.q_heads, h.head_dim), view(d_o, h.q_heads, h.head_dim), view(lse, h.q_heads, 1),
      view(dq, h.q_heads, h.head_dim), view(dk, h.kv_heads, h.head_dim), view(dv, h.kv_heads, h.head_dim));
  auto widen = [](const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); };
  out.o = widen(o);
  out.lse = widen(lse);
  out.dq = widen(dq);
  out.dk = widen(dk);
  out.dv = widen(dv);
  return out;
}

// Folds rows [row, row + count) of a float buffer against rows [position, ...) of the reference.
void compare_rows(const float* got, const std::vector<double>& want, Tokens position, Tokens count, Tokens row_values,
                  double& max_diff, double& max_ref) {
  for (Tokens i = 0; i < count * row_values; ++i) {
    const double g = got[i], w = want[static_cast<std::size_t>(position * row_values + i)];
    if (std::isfinite(w)) max_ref = std::max(max_ref, std::abs(w));
    // Rows with no visible key must be exactly -inf in both; anything else is compared in value.
    const double diff = (g == w) ? 0.0 : std::abs(g - w);
    max_diff = std::max(max_diff, std::isnan(diff) ? INFINITY : diff);
  }
}

}  // namespace

float token_value(std::uint64_t seed, Field field, std::int64_t doc_id, Tokens position, Tokens element) {
  std::uint64_t h = mix64(seed ^ mix64(static_cast<std::uint64_t>(field) + 1));
  h = mix64(h ^ static_cast<std::uint64_t>(doc_id));
  h = mix64(h ^ static_cast<std::uint64_t>(position));
  h = mix64(h ^ static_cast<std::uint64_t>(element));
  return static_cast<float>(static_cast<double>(h >> 40) * 0x1p-23 - 1.0);  // 24 bits: exact in fp32
}

void fill_inputs(const Plan& plan, const Batch& batch, std::uint64_t seed, RankBuffers& buffers) {
  FULCRUM_CHECK(plan.heads.dtype_bytes == 4, "generated inputs are fp32");
  const Program& program = plan.programs.at(static_cast<std::size_t>(buffers.rank()));
  for (Field field : {Field::kQ, Field::kK, Field::kV, Field::kDO}) {
    const int index = program.find_buffer(to_string(field));
    if (index < 0 || program.buffers[index].init != BufferInit::kInput) continue;
    const Tokens width = plan.heads.row_values(field);
    for (const auto& owned : program.owned) {
      auto* out = reinterpret_cast<float*>(buffers.row({index, owned.row, owned.tokens.size()}));
      const auto& doc = batch.documents.at(owned.doc);
      for (Tokens p = owned.tokens.begin; p < owned.tokens.end; ++p) {
        for (Tokens e = 0; e < width; ++e) *out++ = token_value(seed, field, doc.id, p, e);
      }
    }
  }
}

ReferenceKind parse_reference(std::string_view text) {
  if (text == "kernel") return ReferenceKind::kKernel;
  if (text == "fp64") return ReferenceKind::kFp64;
  if (text == "none") return ReferenceKind::kNone;
  fail("reference = '{}': must be kernel, fp64 or none", text);
}

const char* to_string(ReferenceKind kind) {
  switch (kind) {
    case ReferenceKind::kKernel: return "kernel";
    case ReferenceKind::kFp64: return "fp64";
    case ReferenceKind::kNone: return "none";
  }
  return "?";
}

ErrorParts compare_with_reference(const Plan& forward, RankBuffers& forward_buffers, const Plan& backward,
                                  RankBuffers& backward_buffers, const Batch& batch, std::uint64_t seed,
                                  ReferenceKind kind) {
  ErrorParts parts;
  if (kind == ReferenceKind::kNone) return parts;
  const HeadLayout& h = forward.heads;
  const Program& fwd = forward.programs.at(static_cast<std::size_t>(forward_buffers.rank()));
  const Program& bwd = backward.programs.at(static_cast<std::size_t>(backward_buffers.rank()));
  std::map<int, std::vector<OwnedRows>> by_doc;
  for (const auto& owned : fwd.owned) by_doc[owned.doc].push_back(owned);
  for (const auto& [doc_index, rows] : by_doc) {
    const auto ref = reference_document(h, batch.documents.at(doc_index), seed, kind);
    const std::array<const std::vector<double>*, 5> want = {&ref.o, &ref.lse, &ref.dq, &ref.dk, &ref.dv};
    const std::array<Field, 5> fields = {Field::kO, Field::kLse, Field::kDQ, Field::kDK, Field::kDV};
    for (std::size_t t = 0; t < fields.size(); ++t) {
      const bool fwd_field = t < 2;
      const Program& program = fwd_field ? fwd : bwd;
      RankBuffers& buffers = fwd_field ? forward_buffers : backward_buffers;
      const int index = program.find_buffer(to_string(fields[t]));
      FULCRUM_CHECK(index >= 0, "the {} plan has no '{}' buffer", fwd_field ? "forward" : "backward",
                    to_string(fields[t]));
      for (const auto& owned : rows) {
        const auto* got = reinterpret_cast<const float*>(buffers.row({index, owned.row, owned.tokens.size()}));
        compare_rows(got, *want[t], owned.tokens.begin, owned.tokens.size(), h.row_values(fields[t]), parts.max_diff[t],
                     parts.max_ref[t]);
      }
    }
  }
  return parts;
}

}  // namespace fulcrum::runtime
