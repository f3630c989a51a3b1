// Masks as dense boolean matrices, for code outside the C++ kernels that must know every (query, key)
// pair a mask allows: fulcrum.torch's pure-PyTorch attention backend masks its scores with them. The
// matrix is built from MaskSpec::row_bits (what the kernels ask), so the C++ mask stays the single source
// of truth and Python never re-implements a mask kind.
#include "bindings.hpp"
#include "fulcrum/workload/mask.hpp"

#include <algorithm>

namespace fulcrum::python {

void bind_masks(py::module_& m) {
  m.def(
      "mask_matrix",
      [](const MaskSpec& mask, const py::object& queries, const py::object& keys, Tokens doc_len) {
        const std::vector<Range> rows = to_ranges(queries);
        const Range cols = to_range(keys);
        check_in_document(rows, cols, doc_len);
        mask.check_length(doc_len, "doc_len");
        Tokens total_rows = 0;
        for (const Range& r : rows) total_rows += r.size();
        py::array_t<bool> out({total_rows, cols.size()});
        bool* cell = out.mutable_data();
        {
          py::gil_scoped_release unlocked;
          for (const Range& r : rows) {
            for (Tokens q = r.begin; q < r.end; ++q) {
              for (Tokens k = cols.begin; k < cols.end; k += 64) {
                const int width = static_cast<int>(std::min<Tokens>(64, cols.end - k));
                const std::uint64_t bits = mask.row_bits(q, k, width, doc_len);
                for (int j = 0; j < width; ++j) *cell++ = ((bits >> j) & 1U) != 0;
              }
            }
          }
        }
        return out;
      },
      py::arg("mask"), py::arg("queries"), py::arg("keys"), py::arg("doc_len"),
      "bool [sum of query range sizes, key range size]: entry (i, j) says whether the i-th query position "
      "(the ranges' positions, in order) may attend to key position keys[0] + j in a document of doc_len tokens.");
}

}  // namespace fulcrum::python
