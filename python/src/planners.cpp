// Planners and their output: PlannerOptions, the registry, Assignment with its tasks and transfers both
// as objects and as NumPy arrays (one row per task), the form a training loop indexes with.
#include "bindings.hpp"
#include "fulcrum/planners/planner.hpp"

namespace fulcrum::python {
namespace {

std::string kind_name(MaskKind kind);

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

void bind_planners(py::module_& m) {
  py::class_<PlannerOptions>(m, "PlannerOptions")
      .def(py::init([](const ModelShape& model, double tolerance, Tokens granularity, int cp_degree,
                       double wlb_token_cap) {
             return PlannerOptions{model, tolerance, granularity, cp_degree, wlb_token_cap};
           }),
           py::arg("model"), py::arg("tolerance") = 0.1, py::arg("granularity") = 128, py::arg("cp_degree") = 8,
           py::arg("wlb_token_cap") = 1.5)
      .def_readwrite("model", &PlannerOptions::model)
      .def_readwrite("tolerance", &PlannerOptions::tolerance)
      .def_readwrite("granularity", &PlannerOptions::granularity)
      .def_readwrite("cp_degree", &PlannerOptions::cp_degree)
      .def_readwrite("wlb_token_cap", &PlannerOptions::wlb_token_cap)
      .def("validate", &PlannerOptions::validate, py::arg("tokens_per_rank"));

  py::class_<PlannerCapabilities>(m, "PlannerCapabilities")
      .def_readonly("moves_attention", &PlannerCapabilities::moves_attention)
      .def_readonly("splits_documents", &PlannerCapabilities::splits_documents)
      .def_readonly("keeps_documents", &PlannerCapabilities::keeps_documents)
      .def_readonly("keeps_placement", &PlannerCapabilities::keeps_placement)
      .def_property_readonly("masks", [](const PlannerCapabilities& c) {
        std::vector<std::string> names;
        for (MaskKind k : c.masks) names.push_back(kind_name(k));
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
      .def_property_readonly("heads",
                             [](const CATask& t) -> py::object {
                               if (t.heads.all()) return py::none();
                               return py::make_tuple(t.heads.begin, t.heads.end);
                             },
                             "q heads [begin, end) of the task, or None for all heads")
      .def("__repr__", [](const CATask& t) {
        return fmt::format("CATask(doc={}, queries=[{}, {}), keys=[{}, {}), server={})", t.doc, t.queries[0].begin,
                           t.queries[0].end, t.keys.begin, t.keys.end, t.server);
      });

  py::class_<Transfer>(m, "Transfer", "Tokens of documents[doc]'s tensor `kind` move from `src` to `dst`.")
      .def_readonly("kind", &Transfer::kind)
      .def_readonly("doc", &Transfer::doc)
      .def_property_readonly("tokens", [](const Transfer& t) { return to_tuple(t.tokens); })
      .def_readonly("src", &Transfer::src)
      .def_readonly("dst", &Transfer::dst);

  py::class_<Assignment>(m, "Assignment", "A planner's output: CA-tasks with their servers, and the traffic.")
      .def_readonly("planner", &Assignment::planner)
      .def_readonly("batch", &Assignment::batch)
      .def_readonly("tasks", &Assignment::tasks)
      .def_readonly("transfers", &Assignment::transfers)
      .def("task_arrays", &task_arrays,
           "dict of int64 arrays, one row per task: doc [n], queries [n, 2, 2] (a second range of (0, 0) is "
           "empty), keys [n, 2], server [n].")
      .def("transfer_arrays", &transfer_arrays,
           "dict of int64 arrays, one row per transfer: kind [n] (TensorKind value), doc, tokens [n, 2], src, dst.");

  py::class_<Planner>(m, "Planner")
      .def_property_readonly("name", [](const Planner& p) { return std::string(p.name()); })
      .def_property_readonly("capabilities", &Planner::capabilities)
      .def("plan", &Planner::plan, py::arg("batch"), py::call_guard<py::gil_scoped_release>(),
           "Plans one batch (the GIL is released while it runs). Stateful planners (wlb) carry deferred "
           "documents into the next call, so one Planner serves one stream of batches.");
  m.def("make_planner", &make_planner, py::arg("name"), py::arg("options"));
  m.def("planner_names", &planner_names);
}

namespace {
// The prefix of each kind's text form (MaskSpec::parse / to_string), the name users write.
std::string kind_name(MaskKind kind) {
  switch (kind) {
    case MaskKind::kCausal: return "causal";
    case MaskKind::kFull: return "full";
    case MaskKind::kSlidingWindow: return "window";
    case MaskKind::kLambda: return "lambda";
    case MaskKind::kCausalBlockwise: return "blockwise";
    case MaskKind::kSharedQuestion: return "shared-question";
    case MaskKind::kVerticalSlash: return "vslash";
    case MaskKind::kBlockSparse: return "blocksparse";
  }
  return "unknown";
}
}  // namespace

}  // namespace fulcrum::python
