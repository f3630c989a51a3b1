// The cost model: pair counts and FLOPs under a mask, bytes per token, and the hardware models.
#include "bindings.hpp"
#include "fulcrum/cost/attention_cost.hpp"
#include "fulcrum/cost/hardware_model.hpp"
#include "fulcrum/cost/model_cost.hpp"

#include <cmath>

namespace fulcrum::python {
namespace {

// The hardware model times real work: a negative length or a negative or non-finite FLOP count is bad input,
// not a negative or NaN time.
Tokens size_arg(Tokens tokens, const char* field) {
  if (tokens < 0) fail("{} = {}: must be >= 0", field, tokens);
  return tokens;
}

double work_arg(double flops) {
  if (!(flops >= 0) || !std::isfinite(flops)) fail("flops = {}: must be finite and >= 0", flops);
  return flops;
}

}  // namespace

void bind_cost(py::module_& m) {
  m.def(
      "attention_pairs",
      [](const MaskSpec& mask, const py::object& queries, const py::object& keys, Tokens doc_len) {
        mask.check_length(doc_len, "doc_len");
        const std::vector<Range> rows = to_ranges(queries);
        check_in_document(rows, to_range(keys), doc_len);
        return attention_pairs(mask, rows, to_range(keys), doc_len);
      },
      py::arg("mask"), py::arg("queries"), py::arg("keys"), py::arg("doc_len"),
      "Visible (q, k) pairs of query ranges [(begin, end), ...] against keys (begin, end).");
  m.def(
      "attention_forward_flops",
      [](const ModelShape& model, const MaskSpec& mask, const py::object& queries, const py::object& keys,
         Tokens doc_len) {
        mask.check_length(doc_len, "doc_len");
        const std::vector<Range> rows = to_ranges(queries);
        check_in_document(rows, to_range(keys), doc_len);
        return attention_forward_flops(model, mask, rows, to_range(keys), doc_len);
      },
      py::arg("model"), py::arg("mask"), py::arg("queries"), py::arg("keys"), py::arg("doc_len"));
  m.def("attention_forward_flops_per_pair", &attention_forward_flops_per_pair, py::arg("model"));
  m.attr("BACKWARD_FLOPS_FACTOR") = kBackwardFlopsFactor;
  m.def("linear_forward_flops_per_token", &linear_forward_flops_per_token, py::arg("model"));
  m.def("activation_bytes_per_token", &activation_bytes_per_token, py::arg("model"));

  py::class_<TokenBytes>(m, "TokenBytes", "Bytes per token of each tensor that crosses the network.")
      .def_readonly("q", &TokenBytes::q)
      .def_readonly("kv", &TokenBytes::kv)
      .def_readonly("o", &TokenBytes::o)
      .def_readonly("lse", &TokenBytes::lse)
      .def("output", &TokenBytes::output);
  m.def("token_bytes", &token_bytes, py::arg("model"));

  py::class_<HardwareModel>(m, "HardwareModel", "A modelled machine: peak FLOP/s, links, attention table.")
      .def_readonly("name", &HardwareModel::name)
      .def_readonly("devices_per_node", &HardwareModel::devices_per_node)
      .def_readonly("peak_flops", &HardwareModel::peak_flops)
      .def_readonly("memory_bytes", &HardwareModel::memory_bytes)
      .def(
          "attention_forward_s",
          [](const HardwareModel& h, Tokens q_len, Tokens k_len, double flops) {
            return h.attention_forward_s(size_arg(q_len, "q_len"), size_arg(k_len, "k_len"), work_arg(flops));
          },
          py::arg("q_len"), py::arg("k_len"), py::arg("flops"))
      .def(
          "attention_backward_s",
          [](const HardwareModel& h, Tokens q_len, Tokens k_len, double flops) {
            return h.attention_backward_s(size_arg(q_len, "q_len"), size_arg(k_len, "k_len"), work_arg(flops));
          },
          py::arg("q_len"), py::arg("k_len"), py::arg("flops"))
      .def(
          "linear_s", [](const HardwareModel& h, double flops) { return h.linear_s(work_arg(flops)); },
          py::arg("flops"))
      .def("to_dict", [](const HardwareModel& h) { return json_to_python(h.to_json()); })
      .def_static("from_dict", [](const py::object& d) { return HardwareModel::from_json(python_to_json(d)); });
  m.def("hardware", &load_hardware, py::arg("name_or_path"), "A preset (h200-dgx, a100-p4de) or a JSON file.");
  m.def("hardware_names", &hardware_preset_names);
}

}  // namespace fulcrum::python
