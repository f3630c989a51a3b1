// The CPU attention kernels on NumPy arrays, zero-copy: every array is viewed in place, never converted.
// Storage arrays (q, k, v, o, d_o) are all float32, or all uint16 holding bf16 bits; lse and gradients
// are float32. Anything else (another dtype, a non-C-contiguous view, a read-only output, a wrong number
// of dimensions) raises fulcrum.InputError naming the argument, rather than silently copying: a copy of
// an output would drop the kernel's result.
#include "bindings.hpp"
#include "fulcrum/core/simd_path.hpp"
#include "fulcrum/kernels/attention.hpp"
#include "fulcrum/kernels/block_table.hpp"
#include "fulcrum/kernels/reference.hpp"
#include <limits>
#include <memory>
#include <optional>
#include <utility>

namespace fulcrum::python {
namespace {
using kernels::AttentionShape;
using kernels::AttentionTask;
using kernels::BFloat16;
using kernels::HeadTensor;

/// A kernel AttentionTask that owns the per-head masks it views (the C++ task holds only a span, which
/// in the library points into a plan's document). Shared, because pybind copies tasks when it converts a
/// Python list, and every copy must keep viewing live masks.
struct PyAttentionTask : AttentionTask {
  std::shared_ptr<const std::vector<MaskSpec>> owned_head_masks;
};

/// The kernels' task list; its head-mask spans view masks that `tasks` own, so `tasks` must outlive it.
std::vector<AttentionTask> kernel_tasks(const std::vector<PyAttentionTask>& tasks) {
  return {tasks.begin(), tasks.end()};
}

template <class T>
struct NumpyStorage {
  using type = T;
};
template <>
struct NumpyStorage<BFloat16> {
  using type = std::uint16_t;  // NumPy has no bf16: the bits travel as uint16 (torch: .view(torch.int16))
};

/// Views `array` as [rows][heads][dim] of T; 2-d arrays (LSE, [rows][heads]) get dim 1.
template <class T>
HeadTensor<T> view(const py::array& array, std::string_view name, int ndim) {
  using Storage = typename NumpyStorage<std::remove_const_t<T>>::type;
  const auto want = py::dtype::of<Storage>();
  if (!array.dtype().is(want)) {
    fail("{}: dtype {} is not {}; the kernels read arrays in place and never convert", name,
         py::str(array.dtype()).cast<std::string>(), py::str(want).cast<std::string>());
  }
  if (array.ndim() != ndim) fail("{}: {} dimensions, want {}", name, array.ndim(), ndim);
  if (!(array.flags() & py::array::c_style)) fail("{}: not C-contiguous; pass np.ascontiguousarray({})", name, name);
  void* data = const_cast<void*>(array.data());
  if constexpr (!std::is_const_v<T>) {
    if (!array.writeable()) fail("{}: read-only array, the kernel writes into it", name);
    data = array.request(true).ptr;
  }
  const auto dims = array.shape();
  return {static_cast<T*>(data), dims[0], static_cast<int>(dims[1]), ndim == 3 ? static_cast<int>(dims[2]) : 1};
}

/// The caller's array, or a fresh one of `shape` filled with `fill` when the caller passed None.
template <class Storage>
py::array output_or_new(const std::optional<py::array>& given, std::vector<py::ssize_t> shape, Storage fill) {
  if (given) return *given;
  py::array_t<Storage> out(shape);
  std::fill(out.mutable_data(), out.mutable_data() + out.size(), fill);
  return out;
}

AttentionShape shape_of(const py::array& q, const py::array& k, double scale) {
  if (q.ndim() != 3) fail("q: {} dimensions, want 3 ([rows, q_heads, head_dim])", q.ndim());
  if (k.ndim() != 3) fail("k: {} dimensions, want 3 ([rows, kv_heads, head_dim])", k.ndim());
  AttentionShape shape{static_cast<int>(q.shape(1)), static_cast<int>(k.shape(1)), static_cast<int>(q.shape(2)), scale};
  shape.validate();
  return shape;
}

bool is_bf16(const py::array& q) {
  if (q.dtype().is(py::dtype::of<float>())) return false;
  if (q.dtype().is(py::dtype::of<std::uint16_t>())) return true;
  fail("q: dtype {} is not float32 or uint16 (bf16 bits)", py::str(q.dtype()).cast<std::string>());
}

template <class T>
py::tuple forward(const std::vector<AttentionTask>& tasks, const AttentionShape& shape, const py::array& q,
                  const py::array& k, const py::array& v, const std::optional<py::array>& o_in,
                  const std::optional<py::array>& lse_in) {
  using Storage = typename NumpyStorage<T>::type;
  const py::array o = output_or_new<Storage>(o_in, {q.shape(0), q.shape(1), q.shape(2)}, Storage{0});
  const py::array lse = output_or_new<float>(lse_in, {q.shape(0), q.shape(1)}, -std::numeric_limits<float>::infinity());
  const auto qv = view<const T>(q, "q", 3), kv = view<const T>(k, "k", 3), vv = view<const T>(v, "v", 3);
  const auto ov = view<T>(o, "o", 3);
  const auto lv = view<float>(lse, "lse", 2);
  {
    py::gil_scoped_release unlocked;
    kernels::attention_forward<T>(tasks, shape, qv, kv, vv, ov, lv);
  }
  return py::make_tuple(o, lse);
}

template <class T>
py::tuple backward(const std::vector<AttentionTask>& tasks, const AttentionShape& shape, const py::array& q,
                   const py::array& k, const py::array& v, const py::array& o, const py::array& lse,
                   const py::array& d_o, const std::optional<py::array>& dq_in, const std::optional<py::array>& dk_in,
                   const std::optional<py::array>& dv_in) {
  const auto shape_of_array = [](const py::array& a) {
    return std::vector<py::ssize_t>(a.shape(), a.shape() + a.ndim());
  };
  const py::array dq = output_or_new<float>(dq_in, shape_of_array(q), 0.0f);
  const py::array dk = output_or_new<float>(dk_in, shape_of_array(k), 0.0f);
  const py::array dv = output_or_new<float>(dv_in, shape_of_array(v), 0.0f);
  const auto qv = view<const T>(q, "q", 3), kv = view<const T>(k, "k", 3), vv = view<const T>(v, "v", 3);
  const auto ov = view<const T>(o, "o", 3), dov = view<const T>(d_o, "d_o", 3);
  const auto lv = view<const float>(lse, "lse", 2);
  const auto dqv = view<float>(dq, "dq", 3), dkv = view<float>(dk, "dk", 3), dvv = view<float>(dv, "dv", 3);
  {
    py::gil_scoped_release unlocked;
    kernels::attention_backward<T>(tasks, shape, qv, kv, vv, ov, dov, lv, dqv, dkv, dvv);
  }
  return py::make_tuple(dq, dk, dv);
}

RowSpan token_rows(const py::handle& triple) {
  const auto seq = py::reinterpret_borrow<py::sequence>(triple);
  if (py::len(seq) != 3) fail("token rows: got {} values, want 3 (row, position, count)", py::len(seq));
  return {seq[0].cast<Tokens>(), seq[1].cast<Tokens>(), seq[2].cast<Tokens>()};
}

py::tuple rows_tuple(const RowSpan& r) { return py::make_tuple(r.row, r.position, r.count); }

std::span<const double> doubles(const py::array_t<double, py::array::c_style | py::array::forcecast>& a) {
  return {a.data(), static_cast<std::size_t>(a.size())};
}

py::array_t<double> double_array(const std::vector<double>& values, std::vector<py::ssize_t> shape) {
  py::array_t<double> out(shape);
  std::copy(values.begin(), values.end(), out.mutable_data());
  return out;
}

}  // namespace

void bind_kernels(py::module_& m) {
  m.def("simd_path", &simd::simd_path,
        "Which ISA version of the CPU kernels this process runs (every build carries avx512, avx2 and baseline "
        "and picks at run time): the best the CPU runs unless the environment's FULCRUM_SIMD chose another, "
        "e.g. 'avx2 (run-time dispatch; best on this CPU: avx2)'.");
  py::class_<PyAttentionTask>(m, "AttentionTask",
                              "Query rows (one or two (row, position, count) spans) of a document of length doc_len "
                              "against one span of key rows; `position` is the token's place in its document. "
                              "heads: the q heads [begin, end) it computes (None: all); head_masks: one mask per "
                              "q head of the call, or empty for `mask` on every head.")
      .def(py::init([](const py::object& queries, const py::object& keys, Tokens doc_len, const MaskSpec& mask,
                       const std::optional<std::pair<int, int>>& heads, std::vector<MaskSpec> head_masks) {
             PyAttentionTask task;
             task.keys = token_rows(keys);
             task.doc_len = doc_len;
             task.mask = mask;
             const auto spans = py::reinterpret_borrow<py::sequence>(queries);
             if (py::len(spans) < 1 || py::len(spans) > 2) fail("queries: {} spans, want 1 or 2", py::len(spans));
             for (std::size_t i = 0; i < py::len(spans); ++i) task.queries[i] = token_rows(spans[i]);
             if (heads) {
               // The upper bound (the call's q_heads) is checked with the buffers, by the kernels.
               if (heads->first < 0 || heads->first >= heads->second) {
                 fail("heads = ({}, {}): must satisfy 0 <= begin < end", heads->first, heads->second);
               }
               task.heads = {heads->first, heads->second};
             }
             task.owned_head_masks = std::make_shared<const std::vector<MaskSpec>>(std::move(head_masks));
             task.head_masks = *task.owned_head_masks;
             return task;
           }),
           py::arg("queries"), py::arg("keys"), py::arg("doc_len"), py::arg("mask") = MaskSpec::causal(),
           py::arg("heads") = py::none(), py::arg("head_masks") = std::vector<MaskSpec>{})
      .def_property_readonly(
          "queries",
          [](const PyAttentionTask& t) { return py::make_tuple(rows_tuple(t.queries[0]), rows_tuple(t.queries[1])); })
      .def_property_readonly("keys", [](const PyAttentionTask& t) { return rows_tuple(t.keys); })
      .def_property_readonly("doc_len", [](const PyAttentionTask& t) { return t.doc_len; })
      .def_property_readonly("mask", [](const PyAttentionTask& t) { return t.mask; })
      .def_property_readonly("heads",
                             [](const PyAttentionTask& t) -> std::optional<std::pair<int, int>> {
                               if (t.heads.all()) return std::nullopt;
                               return std::pair{t.heads.begin, t.heads.end};
                             })
      .def_property_readonly("head_masks", [](const PyAttentionTask& t) { return *t.owned_head_masks; });

  m.def(
      "block_table",
      [](const std::vector<PyAttentionTask>& tasks, int q_heads, Tokens q_rows, Tokens kv_rows) {
        if (q_heads < 1) fail("q_heads = {}: must be >= 1", q_heads);
        const kernels::BlockTable t = kernels::block_table(kernel_tasks(tasks), q_heads, q_rows, kv_rows);
        auto array = [](const auto& values) {
          using T = typename std::decay_t<decltype(values)>::value_type;
          return py::array_t<T>(static_cast<py::ssize_t>(values.size()), values.data());
        };
        py::dict out;
        out["tile_row"] = array(t.tile_row);
        out["tile_rows"] = array(t.tile_rows);
        out["tile_head_begin"] = array(t.tile_head_begin);
        out["tile_head_end"] = array(t.tile_head_end);
        out["tile_entries"] = array(t.tile_entries);
        out["block_row"] = array(t.block_row);
        out["block_keys"] = array(t.block_keys);
        out["block_gather"] = array(t.block_gather);
        out["block_entries"] = array(t.block_entries);
        out["gather"] = array(t.gather);
        out["entry_tile"] = array(t.entry_tile);
        out["entry_block"] = array(t.entry_block);
        out["entry_bits"] = array(t.entry_bits);
        out["key_order"] = array(t.key_order);
        out["bits"] = array(t.bits);
        out["pairs"] = t.pairs();
        return out;
      },
      py::arg("tasks"), py::arg("q_heads"), py::arg("q_rows"), py::arg("kv_rows"),
      "The tasks' work (checked against Q buffers of q_rows rows and K/V of kv_rows, as the kernels check theirs) as "
      "flat index arrays for block-sparse GPU kernels (kernels/block_table.hpp): 64-row query "
      "tiles per run of q heads sharing a mask, 64-key blocks (contiguous or gathered vertical columns), and the "
      "(tile, block) entries with a visible pair, with 64 bit words per partial entry (bit j of word i: row i "
      "sees key j). A dict of NumPy arrays, plus 'pairs': the visible (q head, row, key) triples it computes.");
  m.def(
      "attention_forward",
      [](const std::vector<PyAttentionTask>& tasks, const py::array& q, const py::array& k, const py::array& v,
         const std::optional<py::array>& o, const std::optional<py::array>& lse, double scale) {
        const AttentionShape shape = shape_of(q, k, scale);
        const std::vector<AttentionTask> plain = kernel_tasks(tasks);
        return is_bf16(q) ? forward<BFloat16>(plain, shape, q, k, v, o, lse)
                          : forward<float>(plain, shape, q, k, v, o, lse);
      },
      py::arg("tasks"), py::arg("q"), py::arg("k"), py::arg("v"), py::arg("o") = py::none(),
      py::arg("lse") = py::none(), py::arg("scale") = 0.0,
      "Fused forward over many tasks. q [rows, q_heads, dim], k/v [rows, kv_heads, dim] (float32, or uint16 "
      "bf16 bits); writes o (like q) and lse (float32 [rows, q_heads]) in place, allocating them when None. "
      "Returns (o, lse). scale <= 0 means 1/sqrt(dim).");
  m.def(
      "attention_backward",
      [](const std::vector<PyAttentionTask>& tasks, const py::array& q, const py::array& k, const py::array& v,
         const py::array& o, const py::array& lse, const py::array& d_o, const std::optional<py::array>& dq,
         const std::optional<py::array>& dk, const std::optional<py::array>& dv, double scale) {
        const AttentionShape shape = shape_of(q, k, scale);
        const std::vector<AttentionTask> plain = kernel_tasks(tasks);
        return is_bf16(q) ? backward<BFloat16>(plain, shape, q, k, v, o, lse, d_o, dq, dk, dv)
                          : backward<float>(plain, shape, q, k, v, o, lse, d_o, dq, dk, dv);
      },
      py::arg("tasks"), py::arg("q"), py::arg("k"), py::arg("v"), py::arg("o"), py::arg("lse"), py::arg("d_o"),
      py::arg("dq") = py::none(), py::arg("dk") = py::none(), py::arg("dv") = py::none(), py::arg("scale") = 0.0,
      "Adds this call's gradients into dq, dk, dv (float32, shaped like q, k, v; zeros allocated when None). "
      "Returns (dq, dk, dv).");
  m.def(
      "reference_attention",
      [](const std::vector<PyAttentionTask>& tasks,
         const py::array_t<double, py::array::c_style | py::array::forcecast>& q,
         const py::array_t<double, py::array::c_style | py::array::forcecast>& k,
         const py::array_t<double, py::array::c_style | py::array::forcecast>& v,
         const std::optional<py::array_t<double, py::array::c_style | py::array::forcecast>>& d_o, double scale) {
        const AttentionShape shape = shape_of(q, k, scale);
        kernels::MaterialisedResult<double> r;
        {
          py::gil_scoped_release unlocked;
          r = kernels::reference_attention(kernel_tasks(tasks), shape, doubles(q), doubles(k), doubles(v),
                                           d_o ? doubles(*d_o) : std::span<const double>{});
        }
        const auto rows = q.shape(0), heads = q.shape(1), dim = q.shape(2);
        py::dict out;
        out["o"] = double_array(r.o, {rows, heads, dim});
        out["lse"] = double_array(r.lse, {rows, heads});
        if (d_o) {
          out["dq"] = double_array(r.dq, {rows, heads, dim});
          out["dk"] = double_array(r.dk, {k.shape(0), k.shape(1), dim});
          out["dv"] = double_array(r.dv, {v.shape(0), v.shape(1), dim});
        }
        return out;
      },
      py::arg("tasks"), py::arg("q"), py::arg("k"), py::arg("v"), py::arg("d_o") = py::none(), py::arg("scale") = 0.0,
      "The fp64 materialised-score reference (a test oracle; inputs are converted to float64). Returns a dict "
      "o, lse (and dq, dk, dv with d_o).");
}

}  // namespace fulcrum::python
