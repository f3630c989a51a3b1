// The simulator: simulate_plan runs a Plan in virtual time on a HardwareModel. New simulator entry points
// (the training-iteration models) get their m.def here, returning plain objects like SimResult's.
#include "bindings.hpp"
#include "fulcrum/sim/engine.hpp"

namespace fulcrum::python {

void bind_sim(py::module_& m) {
  using runtime::RankSummary;
  py::class_<RankSummary>(m, "RankSummary", "One rank's times (seconds), bytes and FLOPs.")
      .def_readonly("attention_s", &RankSummary::attention_s)
      .def_readonly("other_compute_s", &RankSummary::other_compute_s)
      .def_readonly("comm_s", &RankSummary::comm_s)
      .def_readonly("exposed_comm_s", &RankSummary::exposed_comm_s)
      .def_readonly("peer_wait_s", &RankSummary::peer_wait_s)
      .def_readonly("total_s", &RankSummary::total_s)
      .def_readonly("bytes_sent", &RankSummary::bytes_sent)
      .def_readonly("bytes_received", &RankSummary::bytes_received)
      .def_readonly("flops", &RankSummary::flops);

  py::class_<sim::SimResult>(m, "SimResult")
      .def_readonly("makespan_s", &sim::SimResult::makespan_s)
      .def_property_readonly("ranks", [](const sim::SimResult& r) {
        std::vector<RankSummary> out;
        for (const auto& rank : r.ranks) out.push_back(rank.summary);
        return out;
      }, "Per-rank RankSummary.");

  m.def(
      "simulate_plan",
      [](const Plan& plan, const HardwareModel& hardware, bool signal_only) {
        sim::SimOptions options;
        options.signal_only = signal_only;
        return sim::simulate_plan(plan, hardware, options);
      },
      py::arg("plan"), py::arg("hardware"), py::arg("signal_only") = false, py::call_guard<py::gil_scoped_release>(),
      "Runs one Plan in virtual time; signal_only makes every message 1 byte (the `signal` ablation).");
}

}  // namespace fulcrum::python
