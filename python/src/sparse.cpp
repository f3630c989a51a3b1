// Vertical-slash sparse attention: synthetic data with a planted pattern, and the online estimator on
// NumPy arrays (one process: every key of the document).
#include "bindings.hpp"
#include "fulcrum/sparse/estimator.hpp"
#include "fulcrum/sparse/synthetic_attention.hpp"

#include <optional>

namespace fulcrum::python {
namespace {
using sparse::SyntheticTensor;

using FloatArray = py::array_t<float, py::array::c_style | py::array::forcecast>;
using IntArray = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>;

py::array_t<float> generated(const sparse::SyntheticAttention& data, SyntheticTensor tensor, Range positions) {
  py::array_t<float> out(
      {positions.size(), static_cast<Tokens>(data.heads(tensor)), static_cast<Tokens>(data.head_dim())});
  {
    py::gil_scoped_release unlocked;
    data.rows(tensor, positions, {out.mutable_data(), static_cast<std::size_t>(out.size())});
  }
  return out;
}

void check_3d(const FloatArray& a, const char* name) {
  if (a.ndim() != 3) fail("{}: {} dimensions, want 3 ([rows, heads, head_dim])", name, a.ndim());
}

}  // namespace

void bind_sparse(py::module_& m) {
  py::class_<sparse::SyntheticPattern>(m, "SyntheticPattern",
                                       "One q head's planted vertical-slash pattern: slashes at multiples of the "
                                       "period (0 is the local band), heavy tokens (verticals) and the strengths.")
      .def_readonly("period", &sparse::SyntheticPattern::period)
      .def_readonly("slash_offsets", &sparse::SyntheticPattern::slash_offsets)
      .def_readonly("vertical_tokens", &sparse::SyntheticPattern::vertical_tokens)
      .def_readonly("vertical_weights", &sparse::SyntheticPattern::vertical_weights)
      .def_readonly("slash_logit", &sparse::SyntheticPattern::slash_logit)
      .def_readonly("band_logit", &sparse::SyntheticPattern::band_logit)
      .def_readonly("vertical_logit", &sparse::SyntheticPattern::vertical_logit);

  const sparse::SyntheticOptions defaults;
  m.def(
      "synthetic_attention",
      [](std::uint64_t seed, int q_heads, int kv_heads, int head_dim, Tokens doc_len, Tokens begin,
         std::optional<Tokens> end, double slash_logit, double band_logit, double vertical_logit, int heavy_tokens,
         double min_period, double max_period, Tokens band_tokens, double noise) {
        const sparse::SyntheticOptions options{slash_logit, band_logit, vertical_logit, heavy_tokens,
                                               min_period,  max_period, band_tokens,    noise};
        const sparse::SyntheticAttention data(seed, q_heads, kv_heads, head_dim, doc_len, options);
        const Range positions{begin, end.value_or(doc_len)};
        if (positions.begin < 0 || positions.end > doc_len || positions.begin > positions.end) {
          fail("positions = [{}, {}): must lie in [0, {}]", positions.begin, positions.end, doc_len);
        }
        py::list patterns;
        for (int h = 0; h < q_heads; ++h) patterns.append(data.pattern(h));
        return py::make_tuple(generated(data, SyntheticTensor::kQ, positions),
                              generated(data, SyntheticTensor::kK, positions),
                              generated(data, SyntheticTensor::kV, positions), patterns);
      },
      "Synthetic Q, K, V (float32, [rows, heads, head_dim]) for positions [begin, end) of a document with a "
      "planted vertical-slash pattern per head, and the patterns (one per q head). Every value is a function "
      "of (seed, tensor, head, position, element): any range gives the same rows.",
      py::arg("seed"), py::arg("q_heads"), py::arg("kv_heads"), py::arg("head_dim"), py::arg("doc_len"),
      py::arg("begin") = 0, py::arg("end") = py::none(), py::kw_only(), py::arg("slash_logit") = defaults.slash_logit,
      py::arg("band_logit") = defaults.band_logit, py::arg("vertical_logit") = defaults.vertical_logit,
      py::arg("heavy_tokens") = defaults.heavy_tokens, py::arg("min_period") = defaults.min_period,
      py::arg("max_period") = defaults.max_period, py::arg("band_tokens") = defaults.band_tokens,
      py::arg("noise") = defaults.noise);

  py::class_<sparse::VerticalSlashIndex>(m, "VerticalSlashIndex",
                                         "One q head's vertical-slash mask: (q, k) is visible iff k <= q and "
                                         "(q // block - k // block in block_offsets or k in verticals).")
      .def_readonly("block", &sparse::VerticalSlashIndex::block)
      .def_readonly("verticals", &sparse::VerticalSlashIndex::verticals)
      .def_readonly("block_offsets", &sparse::VerticalSlashIndex::block_offsets)
      .def_readonly("recall", &sparse::VerticalSlashIndex::recall)
      .def("kept_pair_fraction", &sparse::kept_pair_fraction, py::arg("doc_len"),
           "The fraction of the causal pairs of a doc_len document the mask keeps (1 - sparsity).")
      .def("__repr__", [](const sparse::VerticalSlashIndex& i) {
        return fmt::format("VerticalSlashIndex(block={}, verticals={}, block_offsets={}, recall={:.4f})", i.block,
                           i.verticals.size(), i.block_offsets.size(), i.recall);
      });

  m.def(
      "estimate_vertical_slash",
      [](const FloatArray& q_obs, const IntArray& obs_positions, const FloatArray& k, const IntArray& k_positions,
         double gamma, Tokens block, Tokens cap, Tokens window) {
        check_3d(q_obs, "q_obs");
        check_3d(k, "k");
        const Tokens doc_len = k.shape(0);
        if (k_positions.ndim() != 1 || k_positions.shape(0) != doc_len) {
          fail("k_positions: want one position per row of k ({})", doc_len);
        }
        if (obs_positions.ndim() != 1 || obs_positions.shape(0) != q_obs.shape(0)) {
          fail("obs_positions: want one position per row of q_obs ({})", q_obs.shape(0));
        }
        if (q_obs.shape(2) != k.shape(2)) fail("q_obs: head_dim {} differs from k's {}", q_obs.shape(2), k.shape(2));
        const sparse::EstimatorShape shape{static_cast<int>(q_obs.shape(1)), static_cast<int>(k.shape(1)),
                                           static_cast<int>(k.shape(2))};
        shape.validate();
        const sparse::VerticalSlashOptions options{gamma, block, cap, window};
        options.validate(doc_len);
        // One process holds every key; the observation rows are the last `window` positions, picked out of
        // q_obs by their positions.
        std::vector<char> seen(static_cast<std::size_t>(doc_len), 0);
        for (const Tokens p : std::span(k_positions.data(), static_cast<std::size_t>(doc_len))) {
          if (p < 0 || p >= doc_len || seen[static_cast<std::size_t>(p)]++) {
            fail("k_positions: {} is out of [0, {}) or repeated; one process holds every key once", p, doc_len);
          }
        }
        const Tokens first = doc_len - window, width = shape.q_heads * shape.head_dim;
        std::vector<float> rows(static_cast<std::size_t>(window * width));
        std::vector<char> have(static_cast<std::size_t>(window), 0);
        for (Tokens r = 0; r < q_obs.shape(0); ++r) {
          const Tokens p = obs_positions.data()[r];
          if (p < first || p >= doc_len) continue;
          have[static_cast<std::size_t>(p - first)] = 1;
          std::copy(q_obs.data() + r * width, q_obs.data() + (r + 1) * width, rows.begin() + (p - first) * width);
        }
        if (std::count(have.begin(), have.end(), 0) > 0) {
          fail("obs_positions: must include every position of the observation window [{}, {})", first, doc_len);
        }
        sparse::VerticalSlashEstimate estimate;
        {
          py::gil_scoped_release unlocked;
          estimate = sparse::estimate_vertical_slash(
              shape, doc_len, rows,
              {{k.data(), static_cast<std::size_t>(k.size())}, {k_positions.data(), static_cast<std::size_t>(doc_len)}},
              options);
        }
        return estimate.heads;
      },
      "MTraining's vertical-slash estimate per q head from the observation rows (the last `window` positions; "
      "q_obs [rows, q_heads, head_dim] may hold more) against every key k [doc_len, kv_heads, head_dim].",
      py::arg("q_obs"), py::arg("obs_positions"), py::arg("k"), py::arg("k_positions"), py::kw_only(),
      py::arg("gamma") = 0.9, py::arg("block") = 64, py::arg("cap") = 4096, py::arg("window") = 64);
}

}  // namespace fulcrum::python
