#include "fulcrum/runtime/attention_data.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/core/random.hpp"
#include "fulcrum/kernels/attention.hpp"
#include "fulcrum/kernels/reference.hpp"
#include "fulcrum/sparse/dynamic_mask.hpp"

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

// Rows [first, first + out.size() / row_values) of `field` of `doc`, in the document's stored order.
void generate_rows(const TokenData& data, const HeadLayout& h, Field field, const Document& doc, Tokens first,
                   std::span<float> out) {
  const auto width = static_cast<std::size_t>(h.row_values(field));
  for (std::size_t i = 0; i * width < out.size(); ++i) {
    const Tokens slot = first + static_cast<Tokens>(i);
    data.row(h, field, doc, doc.mask.source_position(slot, doc.length), out.subspan(i * width, width));
  }
}

template <class Real>
std::vector<Real> generate(const TokenData& data, const HeadLayout& h, Field field, const Document& doc) {
  std::vector<float> rows(static_cast<std::size_t>(doc.length * h.row_values(field)));
  generate_rows(data, h, field, doc, 0, rows);
  return std::vector<Real>(rows.begin(), rows.end());
}

kernels::AttentionShape shape_of(const HeadLayout& h) {
  kernels::AttentionShape s;
  s.q_heads = h.q_heads;
  s.kv_heads = h.kv_heads;
  s.head_dim = h.head_dim;
  return s;
}

WholeDocument<double> reference_document(const HeadLayout& h, const Document& doc, const TokenData& data,
                                         ReferenceKind kind) {
  const std::vector<kernels::AttentionTask> tasks = {
      {{0, {RowSpan{0, 0, doc.length}, RowSpan{}}, {0, 0, doc.length}}, doc.length, doc.mask, doc.head_masks}};
  const auto shape = shape_of(h);
  WholeDocument<double> out;
  if (kind == ReferenceKind::kFp64) {
    out.q = generate<double>(data, h, Field::kQ, doc);
    out.k = generate<double>(data, h, Field::kK, doc);
    out.v = generate<double>(data, h, Field::kV, doc);
    out.d_o = generate<double>(data, h, Field::kDO, doc);
    auto r = kernels::reference_attention(tasks, shape, out.q, out.k, out.v, out.d_o);
    out.o = std::move(r.o);
    out.lse = std::move(r.lse);
    out.dq = std::move(r.dq);
    out.dk = std::move(r.dk);
    out.dv = std::move(r.dv);
    return out;
  }
  auto q = generate<float>(data, h, Field::kQ, doc);
  auto k = generate<float>(data, h, Field::kK, doc);
  auto v = generate<float>(data, h, Field::kV, doc);
  auto d_o = generate<float>(data, h, Field::kDO, doc);
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

void HashedTokenData::row(const HeadLayout&, Field field, const Document& doc, Tokens position,
                          std::span<float> out) const {
  for (std::size_t e = 0; e < out.size(); ++e)
    out[e] = token_value(seed_, field, doc.id, position, static_cast<Tokens>(e));
}

SyntheticTokenData::SyntheticTokenData(std::uint64_t seed, const HeadLayout& heads, const Batch& batch) {
  for (const auto& doc : batch.documents) {
    documents_.try_emplace(
        doc.id, sparse::synthetic_document(seed, doc.id, {heads.q_heads, heads.kv_heads, heads.head_dim}, doc.length));
  }
}

const sparse::SyntheticAttention& SyntheticTokenData::document(std::int64_t doc_id) const {
  const auto it = documents_.find(doc_id);
  FULCRUM_CHECK(it != documents_.end(), "no synthetic data for document {}", doc_id);
  return it->second;
}

void SyntheticTokenData::row(const HeadLayout& heads, Field field, const Document& doc, Tokens position,
                             std::span<float> out) const {
  using sparse::SyntheticTensor;
  const SyntheticTensor tensor = field == Field::kQ   ? SyntheticTensor::kQ
                                 : field == Field::kK ? SyntheticTensor::kK
                                 : field == Field::kV ? SyntheticTensor::kV
                                                      : SyntheticTensor::kDO;
  const auto& source = document(doc.id);
  const auto d = static_cast<std::size_t>(heads.head_dim);
  for (int head = 0; head < heads.heads_of(field); ++head) {
    source.row(tensor, position, head, out.subspan(static_cast<std::size_t>(head) * d, d));
  }
}

void fill_inputs(const Plan& plan, const Batch& batch, const TokenData& data, RankBuffers& buffers) {
  FULCRUM_CHECK(plan.heads.dtype_bytes == 4, "generated inputs are fp32");
  const Program& program = plan.programs.at(static_cast<std::size_t>(buffers.rank()));
  for (Field field : {Field::kQ, Field::kK, Field::kV, Field::kDO}) {
    const int index = program.find_buffer(to_string(field));
    if (index < 0 || program.buffers[index].init != BufferInit::kInput) continue;
    const Tokens width = plan.heads.row_values(field);
    for (const auto& owned : program.owned) {
      auto* out = reinterpret_cast<float*>(buffers.row({index, owned.row, owned.tokens.size()}));
      generate_rows(data, plan.heads, field, batch.documents.at(owned.doc), owned.tokens.begin,
                    {out, static_cast<std::size_t>(owned.tokens.size() * width)});
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
                                  RankBuffers& backward_buffers, const Batch& batch, const TokenData& data,
                                  ReferenceKind kind) {
  ErrorParts parts;
  if (kind == ReferenceKind::kNone) return parts;
  const HeadLayout& h = forward.heads;
  const Program& fwd = forward.programs.at(static_cast<std::size_t>(forward_buffers.rank()));
  const Program& bwd = backward.programs.at(static_cast<std::size_t>(backward_buffers.rank()));
  std::map<int, std::vector<OwnedRows>> by_doc;
  for (const auto& owned : fwd.owned) by_doc[owned.doc].push_back(owned);
  for (const auto& [doc_index, rows] : by_doc) {
    const auto ref = reference_document(h, batch.documents.at(doc_index), data, kind);
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
