// Verification and compilation: the Assignment verifier, compile to a per-rank Plan, verify_plan, and the
// Plan's serialised forms (a dict of plain Python data via its JSON schema, or compact bytes).
#include "bindings.hpp"
#include "fulcrum/plan/compile.hpp"
#include "fulcrum/plan/program_verify.hpp"
#include "fulcrum/plan/serialize.hpp"
#include "fulcrum/plan/step_stats.hpp"
#include "fulcrum/plan/verify.hpp"

namespace fulcrum::python {

using namespace pybind11::literals;  // NOLINT(google-build-using-namespace): "name"_a

void bind_plan(py::module_& m) {
  py::class_<VerifyReport>(m, "VerifyReport", "Empty `errors` means the law holds.")
      .def_readonly("errors", &VerifyReport::errors)
      .def_property_readonly("ok", &VerifyReport::ok)
      .def("summary", &VerifyReport::summary)
      .def("__bool__", &VerifyReport::ok)
      .def("__repr__", [](const VerifyReport& r) { return fmt::format("VerifyReport({})", r.summary()); });

  const auto release = py::call_guard<py::gil_scoped_release>();
  m.def(
      "verify", [](const Assignment& a, const Batch* input) { return input ? verify(a, *input) : verify(a); },
      py::arg("assignment"), py::arg("input") = py::none(), release,
      "Placement, exact coverage, FLOPs conservation and traffic; with `input`, also that the assignment "
      "computes exactly the input batch's documents.");
  m.def("verify_coverage", &verify_coverage, py::arg("assignment"), release,
        "Placement, well-formed tasks and exact coverage only (transfers are not looked at).");

  // dynamic_attr: a Plan instance carries the verified mark (bindings.hpp) in its __dict__.
  py::class_<Plan>(m, "Plan", py::dynamic_attr(), "Per-rank Programs for one pass, as compiled from an Assignment.")
      .def_property_readonly("pass_", [](const Plan& p) { return std::string(to_string(p.pass)); })
      .def_readonly("planner", &Plan::planner)
      .def_property_readonly("mode", [](const Plan& p) { return std::string(to_string(p.mode)); })
      .def_readonly("nano_batches", &Plan::nano_batches)
      .def_property_readonly("ranks", &Plan::ranks)
      .def(
          "to_dict", [](const Plan& p) { return json_to_python(to_json(p)); },
          "The whole plan as plain Python data (the JSON schema of `fulcrum plan --save`).")
      .def_static("from_dict", [](const py::object& d) { return plan_from_json(python_to_json(d)); })
      .def("to_bytes",
           [](const Plan& p) {
             const std::vector<std::uint8_t> bytes = to_binary(p);
             return py::bytes(reinterpret_cast<const char*>(bytes.data()), bytes.size());
           })
      .def_static("from_bytes",
                  [](const py::bytes& b) {
                    const std::string_view view = b;
                    return plan_from_binary({reinterpret_cast<const std::uint8_t*>(view.data()), view.size()});
                  })
      .def("__eq__", [](const Plan& a, const Plan& b) { return a == b; });

  m.def(
      "compile_plan",
      [](const Assignment& a, const ModelShape& model, std::string_view pass, std::string_view mode, int dtype_bytes) {
        const HeadLayout heads = head_layout(model, dtype_bytes);
        const Pass p = parse_pass(pass);
        const CommMode s = parse_comm_mode(mode);
        Plan plan;
        {
          py::gil_scoped_release unlocked;
          plan = compile(a, heads, p, s);
        }
        // compile's output verifies by construction (its tests run verify_plan on every planner's plans).
        py::object out = py::cast(std::move(plan));
        mark_verified(out);
        return out;
      },
      py::arg("assignment"), py::arg("model"), py::arg("pass_") = "forward", py::arg("mode") = "pingpong",
      py::arg("dtype_bytes") = 4,
      "Lowers a verified Assignment to per-rank Programs. pass_: forward | backward; mode: pingpong | "
      "single-stream | signal (pingpong with 1-byte messages); dtype_bytes: 4 (fp32) or 2 (bf16).");
  m.def(
      "verify_plan",
      [](const py::object& plan_object, const Batch* batch) {
        const Plan& plan = plan_object.cast<const Plan&>();
        VerifyReport report;
        {
          py::gil_scoped_release unlocked;
          report = batch ? verify_plan(plan, *batch) : verify_plan(plan);
        }
        // Only the check against its own documents is the one simulate_plan and StepPlan would repeat.
        if (report.ok() && batch == nullptr) mark_verified(plan_object);
        return report;
      },
      py::arg("plan"), py::arg("batch") = py::none(),
      "Runs every rank's Program symbolically: structure, matching messages, no deadlock, data flow, exact "
      "coverage and exactly-once outputs. `batch` is the Assignment's batch; without it, the plan's own "
      "documents and owned rows stand for it.");
  m.def(
      "plan_steps",
      [](const py::object& plan_object, Tokens tile_tokens) {
        const Plan& plan = verified_plan(plan_object);  // it walks the plan's buffers and items
        PlanSteps s;
        {
          py::gil_scoped_release unlocked;  // only around the C++: the dict needs the GIL
          s = plan_steps(plan, tile_tokens);
        }
        return py::dict("flops"_a = s.flops, "active_tiles"_a = s.active_tiles, "bytes_sent"_a = s.bytes_sent);
      },
      py::arg("plan"), py::arg("tile_tokens") = 64,
      "Per [rank][step] (a ring's steps; other plans' nano-batches): planned attention FLOPs, active tiles "
      "(per head, tile_tokens square) and bytes sent, as lists of lists. A plan not from compile_plan is "
      "verified first (InputError if it fails).");
  m.def(
      "step_balance",
      [](const StepMatrix& table) {
        const StepBalance b = step_balance(table);
        return py::dict("worker"_a = b.worker, "step_mean"_a = b.step_mean, "step_sync"_a = b.step_sync);
      },
      py::arg("table"),
      "MTraining's balance of a [rank][step] table: worker (max/mean of rank totals), step_mean (per rank "
      "max/mean over its steps, averaged) and step_sync (sum over steps of the max over ranks / of the mean).");
}

}  // namespace fulcrum::python
