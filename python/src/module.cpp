// fulcrum._core: the compiled half of the `fulcrum` package (python/fulcrum re-exports it).
#include "bindings.hpp"
#include "fulcrum/plan/program_verify.hpp"

namespace fulcrum::python {

Range to_range(const py::handle& pair) {
  const auto seq = py::reinterpret_borrow<py::sequence>(pair);
  if (py::len(seq) != 2) fail("range: got {} values, want 2 (begin, end)", py::len(seq));
  return {seq[0].cast<Tokens>(), seq[1].cast<Tokens>()};
}

std::vector<Range> to_ranges(const py::handle& pairs) {
  std::vector<Range> out;
  for (const py::handle item : pairs) out.push_back(to_range(item));
  return out;
}

void check_in_document(const std::vector<Range>& queries, Range keys, Tokens doc_len) {
  if (doc_len < 1) fail("doc_len = {}: must be >= 1", doc_len);
  auto check = [&](const std::string& name, Range r) {
    if (r.begin < 0 || r.begin > r.end || r.end > doc_len) {
      fail("{} = [{}, {}): must satisfy 0 <= begin <= end <= doc_len = {}", name, r.begin, r.end, doc_len);
    }
  };
  for (std::size_t i = 0; i < queries.size(); ++i) check(fmt::format("queries[{}]", i), queries[i]);
  check("keys", keys);
}

py::array_t<std::int64_t> int_array(std::vector<py::ssize_t> shape, const std::vector<std::int64_t>& values) {
  py::array_t<std::int64_t> out(shape);
  FULCRUM_CHECK(static_cast<std::size_t>(out.size()) == values.size(), "array of {} values for {} slots", values.size(),
                out.size());
  std::copy(values.begin(), values.end(), out.mutable_data());
  return out;
}

py::object json_to_python(const nlohmann::json& json) { return py::module_::import("json").attr("loads")(json.dump()); }

nlohmann::json python_to_json(const py::handle& object) {
  std::string text;
  try {
    // allow_nan=False: NaN and infinities are not JSON, so they are refused here rather than by the parser.
    text = py::module_::import("json").attr("dumps")(object, py::arg("allow_nan") = false).cast<std::string>();
  } catch (const py::error_already_set& e) {
    if (!e.matches(PyExc_TypeError) && !e.matches(PyExc_ValueError)) throw;
    fail("not JSON data (dicts, lists, str, int, finite float, bool, None): {}", e.what());
  }
  return nlohmann::json::parse(text);
}

const Plan& verified_plan(const py::object& plan) {
  const Plan& p = plan.cast<const Plan&>();
  if (py::hasattr(plan, kVerifiedMark) && py::bool_(plan.attr(kVerifiedMark))) return p;
  {
    py::gil_scoped_release unlocked;
    require_valid_plan(p);
  }
  mark_verified(plan);
  return p;
}

// fulcrum.Error is a RuntimeError carrying the library's message unchanged; bad input (ErrorKind::kBadInput)
// raises its subclass fulcrum.InputError, which is also a ValueError, so callers can catch either idiom.
void bind_errors(py::module_& m) {
  // Exception types live as long as the interpreter; the references are deliberately never released.
  static PyObject* error = PyErr_NewException("fulcrum.Error", PyExc_RuntimeError, nullptr);
  static PyObject* input_error = PyErr_NewException(
      "fulcrum.InputError", py::make_tuple(py::handle(error), py::handle(PyExc_ValueError)).ptr(), nullptr);
  m.attr("Error") = py::handle(error);
  m.attr("InputError") = py::handle(input_error);
  py::register_exception_translator([](std::exception_ptr thrown) {
    try {
      if (thrown) std::rethrow_exception(thrown);
    } catch (const Error& e) {
      // A message may quote the user's bytes (a corrupted file): undecodable ones are escaped, so the error is
      // still fulcrum's, not a UnicodeDecodeError.
      const std::string_view what = e.what();
      PyObject* message = PyUnicode_DecodeUTF8(what.data(), static_cast<Py_ssize_t>(what.size()), "backslashreplace");
      PyErr_SetObject(e.kind() == ErrorKind::kBadInput ? input_error : error, message);
      Py_XDECREF(message);
    }
  });
}

}  // namespace fulcrum::python

PYBIND11_MODULE(_core, m) {
  using namespace fulcrum::python;
  m.doc() = "Fulcrum's C++ engine: workloads, planners, plans, cost model, simulator and CPU kernels.";
  bind_errors(m);
  bind_workload(m);
  bind_cost(m);
  bind_planners(m);
  bind_plan(m);
  bind_sim(m);
  bind_kernels(m);
  bind_masks(m);
  bind_sparse(m);
  bind_heads(m);
}
