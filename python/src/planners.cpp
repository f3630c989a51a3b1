// Planners and their output: PlannerOptions, the registry, Assignment with its tasks and transfers both
// as objects and as NumPy arrays (one row per task), the form a training loop indexes with.
#include "bindings.hpp"
#include "fulcrum/planners/options_json.hpp"
#include "fulcrum/planners/planner.hpp"

namespace fulcrum::python {
namespace {

py::dict task_arrays(const Assignment& a) {
  const auto n = static_cast<py::ssize_t>(a.tasks.size());
  std::vector<std::int64_t> doc, queries, keys, server;
  for (const CATask& t : a.tasks) {
    doc.push_back(t.doc);
    queries.insert(queries.end(), {t.queries[0].begin, t.queries[0].end, t.queries[1].begin, t.queries[1].end});
    keys.insert(keys.end(), {t.keys.begin, t.keys.end});
    server.push_back(t.server);
  }
  py::dict out;
  out["doc"] = int_array({n}, doc);
  out["queries"] = int_array({n, 2, 2}, queries);
  out["keys"] = int_array({n, 2}, keys);
  out["server"] = int_array({n}, server);
  return out;
}

py::dict transfer_arrays(const Assignment& a) {
  const auto n = static_cast<py::ssize_t>(a.transfers.size());
  std::vector<std::int64_t> kind, doc, tokens, src, dst;
  for (const Transfer& t : a.transfers) {
    kind.push_back(static_cast<std::int64_t>(t.kind));
    doc.push_back(t.doc);
    tokens.insert(tokens.end(), {t.tokens.begin, t.tokens.end});
    src.push_back(t.src);
    dst.push_back(t.dst);
  }
  py::dict out;
  out["kind"] = int_array({n}, kind);
  out["doc"] = int_array({n}, doc);
  out["tokens"] = int_array({n, 2}, tokens);
  out["src"] = int_array({n}, src);
  out["dst"] = int_array({n}, dst);
  return out;
}

}  // namespace

std::string option_name(std::string name) {
  for (char& c : name) c = c == '_' ? '-' : c;
  return name;
}

namespace {

// An option's value as its kind reads in Python: a float, an int, or a bool for a flag.
py::object typed_value(const OptionSpec& spec, double value) {
  switch (spec.kind) {
    case OptionKind::kFlag: return py::bool_(value == 1);
    case OptionKind::kInteger: return py::int_(static_cast<std::int64_t>(value));
    case OptionKind::kReal: break;
  }
  return py::float_(value);
}

const char* kind_name(OptionKind kind) {
  switch (kind) {
    case OptionKind::kFlag: return "flag";
    case OptionKind::kInteger: return "integer";
    case OptionKind::kReal: break;
  }
  return "real";
}

}  // namespace

void bind_planners(py::module_& m) {
  py::class_<OptionSpec>(m, "OptionSpec", "One planner option as its planner declares it (the CLI's --NAME).")
      .def_property_readonly("name", [](const OptionSpec& s) { return std::string(s.name); })
      .def_property_readonly("help", [](const OptionSpec& s) { return std::string(s.help); })
      .def_property_readonly(
          "kind", [](const OptionSpec& s) { return kind_name(s.kind); },
          "'real', 'integer' or 'flag' (True/False in Python, 0/1 on the command line)")
      .def_property_readonly("default", [](const OptionSpec& s) { return typed_value(s, s.default_value); })
      .def_property_readonly("min", [](const OptionSpec& s) { return typed_value(s, s.lowest()); })
      .def_property_readonly("max", [](const OptionSpec& s) { return typed_value(s, s.highest()); })
      .def("__repr__", [](const OptionSpec& s) {
        return fmt::format("OptionSpec({}, default {}, {})", s.name, s.default_text(), s.range_text());
      });

  py::class_<PlannerOptions>(m, "PlannerOptions",
                             "The model, the machine size, a seed, and planner options by name: every option of "
                             "every planner (planner_options()), as keyword arguments with '_' for '-', e.g. "
                             "PlannerOptions(model, tolerance=0.05, dcp_block=512). Unset options take their "
                             "declared defaults; values are range-checked (fulcrum.InputError names the option).")
      .def(py::init([](const ModelShape& model, int devices_per_machine, std::uint64_t seed, const py::kwargs& kw) {
             PlannerOptions o;
             o.model = model;
             o.devices_per_machine = devices_per_machine;
             o.seed = seed;
             for (const auto& [key, value] : kw) o.set(option_name(key.cast<std::string>()), value.cast<double>());
             o.validate();
             return o;
           }),
           py::arg("model"), py::kw_only(), py::arg("devices_per_machine") = 8, py::arg("seed") = 0)
      .def_readwrite("model", &PlannerOptions::model)
      .def_readwrite("devices_per_machine", &PlannerOptions::devices_per_machine)
      .def_readwrite("seed", &PlannerOptions::seed)
      .def(
          "set", [](PlannerOptions& o, const std::string& name, double value) { o.set(option_name(name), value); },
          py::arg("name"), py::arg("value"), "Sets one option ('tolerance', 'dcp_block' or 'dcp-block', ...).")
      .def(
          "get",
          [](const PlannerOptions& o, const std::string& name) {
            const OptionSpec& spec = find_planner_option(option_name(name));
            return typed_value(spec, o.get(spec));
          },
          py::arg("name"), "The option's value (its default when unset).")
      .def("__getattr__",
           [](const PlannerOptions& o, const std::string& name) {
             for (const auto& spec : planner_option_specs()) {
               if (spec.name == option_name(name)) return typed_value(spec, o.get(spec));
             }
             throw py::attribute_error(fmt::format("PlannerOptions has no option '{}'", name));
           })
      .def_property_readonly(
          "values",
          [](const PlannerOptions& o) {
            py::dict out;
            for (const auto& spec : planner_option_specs()) {
              out[py::str(std::string(spec.name))] = typed_value(spec, o.get(spec));
            }
            return out;
          },
          "Every option's value by its CLI name, defaults included.");
  m.def("planner_options", &planner_option_specs,
        "Every planner option (name, kind, help, default, range), once each.");
  m.def(
      "planner_options_schema",
      [] { return py::module_::import("json").attr("loads")(planner_options_schema().dump()); },
      "The JSON Schema of the options a plan report writes (docs/schemas/plan.schema.json holds it).");

  py::class_<PlannerCapabilities>(m, "PlannerCapabilities")
      .def_readonly("moves_attention", &PlannerCapabilities::moves_attention)
      .def_readonly("splits_documents", &PlannerCapabilities::splits_documents)
      .def_readonly("splits_heads", &PlannerCapabilities::splits_heads)
      .def_readonly("keeps_documents", &PlannerCapabilities::keeps_documents)
      .def_readonly("keeps_placement", &PlannerCapabilities::keeps_placement)
      .def_readonly("defers_documents", &PlannerCapabilities::defers_documents)
      .def_readonly("overlaps_traffic", &PlannerCapabilities::overlaps_traffic)
      .def_readonly("pools_pipeline_stages", &PlannerCapabilities::pools_pipeline_stages)
      .def_property_readonly("cp_groups",
                             [](const PlannerCapabilities& c) {
                               switch (c.cp_groups) {
                                 case CpGroups::kNone: return "none";
                                 case CpGroups::kWithinGroup: return "within-group";
                                 case CpGroups::kHoldsDocuments: return "holds-documents";
                               }
                               return "?";
                             })
      .def_property_readonly("masks", [](const PlannerCapabilities& c) {
        std::vector<std::string> names;
        for (MaskKind k : c.masks) names.emplace_back(mask_kind_info(k).name);
        return names;
      });

  py::enum_<TensorKind>(m, "TensorKind")
      .value("Q", TensorKind::kQ)
      .value("KV", TensorKind::kKV)
      .value("OUT", TensorKind::kOut);

  py::class_<CATask>(m, "CATask", "Rows `queries` (one or two ranges) of documents[doc] against `keys`, on `server`.")
      .def_readonly("doc", &CATask::doc)
      .def_property_readonly("queries",
                             [](const CATask& t) {
                               py::list out;
                               for (Range r : t.query_ranges()) out.append(to_tuple(r));
                               return out;
                             })
      .def_property_readonly("keys", [](const CATask& t) { return to_tuple(t.keys); })
      .def_readonly("server", &CATask::server)
      .def_property_readonly(
          "heads", [](const CATask& t) { return heads_or_none(t.heads); },
          "q heads [begin, end) of the task, or None for all heads")
      .def("__repr__", [](const CATask& t) {
        return fmt::format("CATask(doc={}, queries=[{}, {}), keys=[{}, {}), server={})", t.doc, t.queries[0].begin,
                           t.queries[0].end, t.keys.begin, t.keys.end, t.server);
      });

  py::class_<Transfer>(m, "Transfer",
                       "Tokens of documents[doc]'s tensor `kind` move from `src` to `dst` (-1: to every rank but "
                       "`src`, as a ring broadcasts its K/V), for q heads `heads`.")
      .def_readonly("kind", &Transfer::kind)
      .def_readonly("doc", &Transfer::doc)
      .def_property_readonly("tokens", [](const Transfer& t) { return to_tuple(t.tokens); })
      .def_readonly("src", &Transfer::src)
      .def_readonly("dst", &Transfer::dst)
      .def_property_readonly(
          "heads", [](const Transfer& t) { return heads_or_none(t.heads); },
          "q heads [begin, end) it moves (K/V: the kv heads they read), or None for all heads");

  py::class_<Assignment>(m, "Assignment", "A planner's output: CA-tasks with their servers, and the traffic.")
      .def_readonly("planner", &Assignment::planner)
      .def_readonly("batch", &Assignment::batch)
      .def_readonly("tasks", &Assignment::tasks)
      .def_readonly("transfers", &Assignment::transfers)
      .def("task_arrays", &task_arrays,
           "dict of int64 arrays, one row per task: doc [n], queries [n, 2, 2] (a second range of (0, 0) is "
           "empty), keys [n, 2], server [n].")
      .def("transfer_arrays", &transfer_arrays,
           "dict of int64 arrays, one row per transfer: kind [n] (TensorKind value), doc, tokens [n, 2], src, dst "
           "(-1: every rank but src).");

  py::class_<Planner>(m, "Planner")
      .def_property_readonly("name", [](const Planner& p) { return std::string(p.name()); })
      .def_property_readonly("capabilities", &Planner::capabilities, py::return_value_policy::copy)
      .def("plan", &Planner::plan, py::arg("batch"), py::call_guard<py::gil_scoped_release>(),
           "Plans one batch (the GIL is released while it runs). Stateful planners (wlb) carry deferred "
           "documents into the next call, so one Planner serves one stream of batches.")
      .def("document_length_multiple", &Planner::document_length_multiple, py::arg("ranks"),
           "Document lengths it accepts on `ranks` ranks are multiples of this (striped layouts: ranks x "
           "stripe; else 1).");
  m.def("make_planner", &make_planner, py::arg("name"), py::arg("options"));
  m.def("planner_names", &planner_names);
  m.def(
      "meta_planner_names",
      [] {
        std::vector<std::string> names;
        for (const auto& meta : meta_planner_registry()) names.emplace_back(meta.name);
        return names;
      },
      "The meta-planners (auto): they choose among candidate planners per batch (fulcrum.AutoPlanner).");
  m.def("is_meta_planner", &is_meta_planner, py::arg("name"));
}

}  // namespace fulcrum::python
