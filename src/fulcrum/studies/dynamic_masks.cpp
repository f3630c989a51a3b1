#include "fulcrum/studies/dynamic_masks.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/sparse/estimator.hpp"

#include <algorithm>

namespace fulcrum::studies {
namespace {

// The estimator's collectives over a Communicator: all_gather, then combined in rank order; the
// broadcast comes from `root`, the rank that holds the document's observation rows.
class CommunicatorReduce final : public sparse::EstimatorReduce {
 public:
  CommunicatorReduce(runtime::Communicator& comm, int root) : comm_(comm), root_(root) {}
  void max(std::span<double> values) override {
    combine(values, [](double a, double b) { return std::max(a, b); });
  }
  void sum(std::span<double> values) override {
    combine(values, [](double a, double b) { return a + b; });
  }
  void broadcast_from_last(std::span<float> values) override {
    const std::vector<double> mine(values.begin(), values.end());
    const auto all = comm_.all_gather(mine);
    const std::size_t from = static_cast<std::size_t>(root_) * values.size();
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(all[from + i]);
  }

 private:
  template <class Op>
  void combine(std::span<double> values, Op op) {
    const auto all = comm_.all_gather(std::vector<double>(values.begin(), values.end()));
    for (std::size_t i = 0; i < values.size(); ++i) {
      double x = all[i];
      for (int r = 1; r < comm_.size(); ++r) x = op(x, all[static_cast<std::size_t>(r) * values.size() + i]);
      values[i] = x;
    }
  }
  runtime::Communicator& comm_;
  int root_;
};

}  // namespace

DynamicMaskStats estimate_dynamic_masks(Batch& batch, const HeadLayout& heads, const runtime::TokenData& data,
                                        const DynamicMaskSpec& spec, runtime::Communicator& comm) {
  const sparse::VerticalSlashOptions options = spec.options();
  const sparse::EstimatorShape shape{heads.q_heads, heads.kv_heads, heads.head_dim};
  const auto k_width = static_cast<std::size_t>(heads.row_values(Field::kK));
  const auto q_width = static_cast<std::size_t>(heads.row_values(Field::kQ));
  DynamicMaskStats stats;
  double recall_sum = 0, kept = 0, causal = 0;
  for (int d = 0; d < static_cast<int>(batch.documents.size()); ++d) {
    Document& doc = batch.documents[d];
    if (!sparse::estimates(spec, doc.length)) continue;  // too short to observe: stays causal
    // This rank's keys of the document, and the rank holding its last token (the observation rows).
    std::vector<Tokens> positions;
    int root = 0;
    for (const auto& s : batch.segments_of(d)) {
      if (s.tokens.end == doc.length) root = s.rank;
      if (s.rank != comm.rank()) continue;
      for (Tokens p = s.tokens.begin; p < s.tokens.end; ++p) positions.push_back(p);
    }
    std::vector<float> k(positions.size() * k_width), q_obs;
    for (std::size_t i = 0; i < positions.size(); ++i) {
      data.row(heads, Field::kK, doc, positions[i], std::span(k).subspan(i * k_width, k_width));
    }
    if (comm.rank() == root) {
      q_obs.resize(static_cast<std::size_t>(options.window) * q_width);
      for (Tokens i = 0; i < options.window; ++i) {
        data.row(heads, Field::kQ, doc, doc.length - options.window + i,
                 std::span(q_obs).subspan(static_cast<std::size_t>(i) * q_width, q_width));
      }
    }
    CommunicatorReduce reduce(comm, root);
    const auto estimate = sparse::estimate_vertical_slash(shape, doc.length, q_obs, {k, positions}, options, reduce);
    doc.head_masks.clear();
    for (const auto& index : estimate.heads) {
      doc.head_masks.push_back(sparse::to_mask(index));
      kept += static_cast<double>(doc.head_masks.back().document_pairs(doc.length));
      causal += static_cast<double>(MaskSpec::causal().document_pairs(doc.length));
      stats.recall_min = std::min(stats.recall_min, index.recall);
      recall_sum += index.recall;
    }
    ++stats.documents;
  }
  if (stats.documents > 0) {
    stats.recall_mean = recall_sum / (stats.documents * heads.q_heads);
    stats.sparsity = 1 - kept / causal;
  }
  return stats;
}

}  // namespace fulcrum::studies
