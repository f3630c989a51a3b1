// The simulator: simulate_plan runs a Plan in virtual time on a HardwareModel; simulate_training runs
// training iterations (what `fulcrum simulate` prints one row of) and returns the row's JSON as a dict.
#include "bindings.hpp"
#include "fulcrum/sim/auto_choice.hpp"
#include "fulcrum/sim/engine.hpp"
#include "fulcrum/sim/parallel.hpp"
#include "fulcrum/sim/training.hpp"

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
      .def_property_readonly(
          "ranks",
          [](const sim::SimResult& r) {
            std::vector<RankSummary> out;
            for (const auto& rank : r.ranks) out.push_back(rank.summary);
            return out;
          },
          "Per-rank RankSummary.");

  m.def(
      "simulate_plan",
      [](const py::object& plan_object, const HardwareModel& hardware) {
        // A Plan from Python may come from bytes or a dict: the simulator runs only plans that verify.
        const Plan& plan = verified_plan(plan_object);
        py::gil_scoped_release unlocked;
        return sim::simulate_plan(plan, hardware);
      },
      py::arg("plan"), py::arg("hardware"),
      "Runs one Plan in virtual time (a plan compiled in mode `signal` sends 1-byte messages). The plan is "
      "verified first (verify_plan against its own documents and owners): one that fails raises InputError.");

  m.def(
      "choose_plan",
      [](const Batch& batch, const PlannerOptions& options, const HardwareModel& hardware, int tp,
         const std::vector<std::string>& candidates, const std::string& mode, const std::string& baseline_mode) {
        if (tp < 1 || hardware.devices_per_node % tp != 0) {
          fail("tp = {}: must divide the {} GPUs of a {} node", tp, hardware.devices_per_node, hardware.name);
        }
        const sim::LayerSetup setup{options.model, hardware, sim::tp_group_hardware(hardware, tp), tp,
                                    parse_comm_mode(mode)};
        const CommMode baseline = parse_comm_mode(baseline_mode, "baseline_mode");
        sim::BatchChoice choice;
        {
          py::gil_scoped_release release;
          choice = sim::choose_plan(batch, candidates, options, setup, baseline);
        }
        py::dict out;
        out["assignment"] = std::move(choice.assignment);
        out["chosen"] = choice.chosen;
        out["runner_up"] = choice.runner_up.empty() ? py::object(py::none()) : py::str(choice.runner_up);
        out["chosen_s"] = choice.chosen_s;
        out["runner_up_s"] = choice.runner_up_s;
        out["candidates"] = choice.candidates;
        out["planning_s"] = choice.planning_s;
        out["refused"] = choice.refused;
        out["simulating_s"] = choice.simulating_s;
        return out;
      },
      py::arg("batch"), py::arg("options"), py::arg("hardware"), py::kw_only(), py::arg("tp") = 1,
      py::arg("candidates") = std::vector<std::string>{}, py::arg("mode") = "pingpong",
      py::arg("baseline_mode") = "single-stream",
      "auto for one batch: every candidate (default: each planner that computes exactly its batch) plans it,\n"
      "one steady-state layer's forward and backward of each plan is simulated on `hardware` (the whole-layer\n"
      "schedule for ping-pong; a rank: a TP group of tp GPUs; the planners that overlap traffic in `mode`,\n"
      "the others in baseline_mode), and the fastest plan is chosen. Returns a dict: assignment (verified), chosen, "
      "runner_up (None when one candidate planned),\n"
      "chosen_s and runner_up_s (simulated layer seconds), candidates, planning_s (per candidate), refused\n"
      "('name: why' for each that refused the batch), simulating_s.");

  m.def(
      "simulate_training",
      [](const std::string& planner, const ModelShape& model, const HardwareModel& hardware, int gpus, int tp, int pp,
         int cp, int microbatches, const std::string& mode, const std::string& dataset, Tokens max_doc_len,
         Tokens tokens_per_rank, int iterations, int warmup, std::uint64_t seed, const py::dict& options,
         const std::vector<std::string>& candidates, const std::string& baseline_mode,
         const std::string& layer_schedule, const std::string& recompute, bool zero1) {
        sim::TrainingConfig c;
        c.whole_layer = sim::parse_layer_schedule(layer_schedule, "layer_schedule");
        c.memory = {sim::parse_recompute(recompute), zero1};
        c.planner = planner;
        c.parallel = {gpus, tp, pp, cp, microbatches};
        c.mode = parse_comm_mode(mode);
        c.baseline_mode = parse_comm_mode(baseline_mode, "baseline_mode");
        c.candidates = candidates;
        c.dataset = dataset;
        c.max_doc_len = max_doc_len;
        c.tokens_per_rank = tokens_per_rank;
        c.iterations = iterations;
        c.warmup_iterations = warmup;
        c.seed = seed;
        for (const auto& [key, value] : options) {
          c.planner_options.set(option_name(key.cast<std::string>()), value.cast<double>());
        }
        nlohmann::json out;
        {
          py::gil_scoped_release release;
          out = sim::simulate_training(c, model, hardware).to_json();
        }
        return json_to_python(out);
      },
      py::arg("planner"), py::arg("model"), py::arg("hardware"), py::kw_only(), py::arg("gpus") = 64, py::arg("tp") = 8,
      py::arg("pp") = 1, py::arg("cp") = 1, py::arg("microbatches") = 0, py::arg("mode") = "pingpong",
      py::arg("dataset") = "pretrain", py::arg("max_doc_len") = 131072, py::arg("tokens_per_rank") = 0,
      py::arg("iterations") = sim::TrainingConfig{}.iterations,
      py::arg("warmup") = sim::TrainingConfig{}.warmup_iterations, py::arg("seed") = 0, py::arg("options") = py::dict(),
      py::arg("candidates") = std::vector<std::string>{}, py::arg("baseline_mode") = "single-stream",
      py::arg("layer_schedule") = "whole", py::arg("recompute") = "none", py::arg("zero1") = true,
      "Simulates training iterations of one planner (any registered planner, or 'auto') and returns\n"
      "the result as a dict: mean_iteration_s, tokens_per_s, breakdown (linear_s, attention_s,\n"
      "exposed_comm_s, idle_s, dp_sync_s; they add up to the iteration), attention_imbalance,\n"
      "attention_bytes, memory (per GPU, with out_of_memory) and the layout. `options`: planner options by\n"
      "name, e.g. {'tolerance': 0.05} (the model, machine size and cp come from the other arguments).\n"
      "tokens_per_s is the steady state's: `warmup` iterations first fill a deferring planner's queue (wlb's),\n"
      "which is carried over rather than drained, and what it carried counts at the rate the planner computed.\n"
      "'auto': each iteration every candidate (default: each planner that computes exactly its batch, and wlb,\n"
      "whose queue carries over the iterations it is chosen for) plans and is simulated, the fastest counts\n"
      "(wlb valued by the rate of wlb run alone beside it);\n"
      "its planners that do not overlap traffic run in baseline_mode,\n"
      "cp=0 gives each its own CP degree, and result['auto'] names the choice and runner-up per iteration\n"
      "and the planning time per candidate. layer_schedule: 'whole' (ping-pong layers overlap across their\n"
      "boundaries, DistCA's schedule) or 'per-layer' (one layer at a time). recompute ('none', 'selective',\n"
      "'full') and zero1 (optimizer states sharded over dp) set what result['memory'] counts.");
}

}  // namespace fulcrum::python
