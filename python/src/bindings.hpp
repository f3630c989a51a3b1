// The pybind11 skin over the Fulcrum library: one bind_* function per library area, each in its own
// file, plus the few conversions they share. Nothing here computes; every call forwards to the library.
#pragma once
#include "fulcrum/core/error.hpp"
#include "fulcrum/core/interval.hpp"
#include "fulcrum/plan/program.hpp"
#include <nlohmann/json.hpp>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <vector>

namespace fulcrum::python {
namespace py = pybind11;

void bind_errors(py::module_& m);
void bind_workload(py::module_& m);
void bind_planners(py::module_& m);
void bind_plan(py::module_& m);
void bind_cost(py::module_& m);
void bind_sim(py::module_& m);
void bind_kernels(py::module_& m);
void bind_masks(py::module_& m);
void bind_sparse(py::module_& m);
void bind_heads(py::module_& m);

/// Ranges cross the boundary as (begin, end) tuples, the form Python code slices with.
inline py::tuple to_tuple(Range r) { return py::make_tuple(r.begin, r.end); }
/// A head range as (begin, end), or None for "every head".
inline py::object heads_or_none(HeadRange h) {
  return h.all() ? py::none() : py::object(py::make_tuple(h.begin, h.end));
}
Range to_range(const py::handle& pair);
std::vector<Range> to_ranges(const py::handle& pairs);
/// Query ranges and a key range of one document: doc_len >= 1 and every range inside [0, doc_len).
void check_in_document(const std::vector<Range>& queries, Range keys, Tokens doc_len);
/// A planner option's CLI name from a Python keyword: '_' becomes '-' (dcp_block -> dcp-block).
std::string option_name(std::string name);

/// A fresh int64 NumPy array of `shape` filled row by row from `values` (size = product of shape).
py::array_t<std::int64_t> int_array(std::vector<py::ssize_t> shape, const std::vector<std::int64_t>& values);

/// Plans run by simulate_plan and fulcrum.torch must pass verify_plan; verifying costs far more than
/// compiling (a symbolic run of every row), so a Plan object made by compile_plan, or one that passed
/// verify_plan, carries this attribute and is not verified again. Plans from bytes or dicts lack it.
inline constexpr const char* kVerifiedMark = "_verified";
inline void mark_verified(const py::object& plan) { py::setattr(plan, kVerifiedMark, py::bool_(true)); }
/// The Plan inside `plan`, verified against its own documents and owners unless it carries the mark;
/// a plan that fails raises InputError.
const Plan& verified_plan(const py::object& plan);

/// Plain-data results (hardware models, plans) go through their JSON form: one schema, already tested.
py::object json_to_python(const nlohmann::json& json);
nlohmann::json python_to_json(const py::handle& object);

}  // namespace fulcrum::python
