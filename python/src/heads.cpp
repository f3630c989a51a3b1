// FlexAttn's head solvers: fulcrum.assign_heads over a scenario or a head pattern report, and the lists
// of solvers and scenarios.
#include "bindings.hpp"
#include "fulcrum/planners/heads/evaluate.hpp"
#include "fulcrum/planners/heads/patterns.hpp"
#include "fulcrum/planners/heads/scenarios.hpp"

#include <optional>

namespace fulcrum::python {

void bind_heads(py::module_& m) {
  m.def("head_solvers", &heads::head_solver_names, "The registered head solvers (fulcrum heads --solvers).");
  m.def("head_scenarios", &heads::scenario_names, "FlexAttn's ten allocation scenarios, S1..S10.");
  m.def(
      "head_pattern_mask",
      [](const std::string& pattern, Tokens prompt_tokens, std::uint64_t seed) {
        return heads::to_mask(heads::HeadPattern::parse(pattern), prompt_tokens, seed);
      },
      py::arg("pattern"), py::arg("prompt_tokens"), py::arg("seed"),
      "The mask one head of pattern key `pattern` ('full', 'a-shape:SINK:WINDOW', 'vertical-slash:V:S', "
      "'block-sparse:B:blocks=N' or 'block-sparse:B:density=D') runs over a prompt of prompt_tokens tokens, its "
      "columns, diagonals or blocks drawn from `seed` (heads::to_mask: what the prefill and `fulcrum profile "
      "--heads` run).");
  m.def("head_mask_seed", &heads::head_mask_seed, py::arg("seed"), py::arg("layer"), py::arg("head"),
        "The seed of one head's mask in a prefill seeded `seed` (heads::head_mask_seed).");
  m.def(
      "assign_heads",
      [](const py::object& patterns, const std::optional<std::string>& scenario, std::optional<int> devices,
         const std::string& solver, std::uint64_t seed, Tokens prompt_tokens, int layer,
         const std::optional<std::string>& profile) {
        if (patterns.is_none() == !scenario.has_value()) fail("patterns / scenario: give exactly one");
        heads::LayerPatterns heads_of_layer;
        int kv_heads = 0;
        int d = devices.value_or(0);
        if (scenario) {
          const heads::Scenario s = heads::scenario(*scenario, seed);
          heads_of_layer = s.heads;
          kv_heads = s.kv_heads;
          if (!devices) d = s.devices;
          if (layer != 0) fail("layer = {}: a scenario has one layer (0)", layer);
        } else {
          const heads::HeadPatternReport report = py::isinstance<py::str>(patterns)
                                                      ? heads::read_head_patterns(patterns.cast<std::string>())
                                                      : heads::head_patterns_from_json(python_to_json(patterns));
          const int layers = static_cast<int>(report.layers.size());
          if (layer < 0 || layer >= layers) fail("layer = {}: must be in [0, {}]", layer, layers - 1);
          heads_of_layer = report.layers[static_cast<std::size_t>(layer)];
          kv_heads = report.kv_heads;
          if (!devices) fail("devices: required with patterns");
        }
        heads::HeadCostModel model;
        if (profile) model.profile = heads::RuntimeProfile::load(*profile);
        heads::HeadSolverResult result;
        {
          py::gil_scoped_release release;
          const heads::LayerCosts costs = model.layer(heads_of_layer, kv_heads, prompt_tokens);
          result = heads::run_head_solver(heads::find_head_solver(solver), costs, d, seed, 1);
        }
        nlohmann::json j = heads::to_json(result);
        j["solver"] = result.solver;
        j["devices"] = d;
        return json_to_python(j);
      },
      py::arg("patterns") = py::none(), py::kw_only(), py::arg("scenario") = py::none(),
      py::arg("devices") = py::none(), py::arg("solver") = "lpt-ls", py::arg("seed") = 1,
      py::arg("prompt_tokens") = 131072, py::arg("layer") = 0, py::arg("profile") = py::none(),
      "Assigns one layer's q heads to devices with a head solver. `patterns`: a head pattern report (a path or "
      "its JSON as a dict; docs/cli.md) with `layer` and `devices`, or `scenario` 'S1'..'S10' (devices default "
      "to the scenario's). Costs from `profile` (a runtime profile JSON path) or the analytic FLOPs model. "
      "Returns a dict: assignment (device per q head), device_s, layer_s, spread, lower_bound_s, "
      "lower_bound_simple_s, gap, proven_optimal, solve_ms, solver, devices.");
}

}  // namespace fulcrum::python
