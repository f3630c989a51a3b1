// The planner registry: one line per strategy. Adding a strategy is its folder plus a line here.
#include "fulcrum/core/error.hpp"
#include "fulcrum/planners/baselines/packed.hpp"
#include "fulcrum/planners/baselines/perdoc_cp.hpp"
#include "fulcrum/planners/baselines/static_cp.hpp"
#include "fulcrum/planners/baselines/wlb.hpp"
#include "fulcrum/planners/dcp/dcp_planner.hpp"
#include "fulcrum/planners/distca/distca_planner.hpp"
#include "fulcrum/planners/mtraining/striped_ring.hpp"
#include "fulcrum/planners/planner.hpp"

#include <fmt/ranges.h>

#include <algorithm>

namespace fulcrum {
namespace {

// An option registered by several planners must be the same declaration in each.
void check_shared_options(const std::vector<PlannerRegistration>& registry) {
  for (std::size_t i = 0; i < registry.size(); ++i) {
    for (const auto& a : registry[i].options) {
      for (std::size_t j = 0; j < i; ++j) {
        for (const auto& b : registry[j].options) {
          FULCRUM_CHECK(a.name != b.name || (a.help == b.help && a.kind == b.kind &&
                                             a.default_value == b.default_value && a.min == b.min && a.max == b.max),
                        "planners {} and {} declare option {} differently", registry[j].name, registry[i].name, a.name);
        }
      }
    }
  }
}

}  // namespace

const std::vector<PlannerRegistration>& planner_registry() {
  static const std::vector<PlannerRegistration> registry = [] {
    std::vector<PlannerRegistration> r = {distca_registration(),    dcp_registration(),     packed_registration(),
                                          perdoc_cp_registration(), wlb_registration(),     ring_registration(),
                                          zigzag_registration(),    striped_registration(), mtraining_registration()};
    check_shared_options(r);
    return r;
  }();
  return registry;
}

std::vector<std::string> planner_names() {
  std::vector<std::string> names;
  for (const auto& r : planner_registry()) names.emplace_back(r.name);
  return names;
}

const PlannerRegistration& find_planner(std::string_view name) {
  for (const auto& r : planner_registry()) {
    if (r.name == name) return r;
  }
  fail("planner = '{}': unknown; choose from {}", name, fmt::join(planner_names(), ", "));
}

const std::vector<MetaPlannerRegistration>& meta_planner_registry() {
  static const std::vector<MetaPlannerRegistration> registry = {
      {.name = "auto",
       .summary = "chooses, per batch (per iteration in simulate), the candidate whose plan simulates fastest",
       .candidates_help = "the planners auto compares (default: every planner that computes exactly its batch; "
                          "simulate adds those that defer documents)"},
  };
  return registry;
}

bool is_meta_planner(std::string_view name) {
  const auto& metas = meta_planner_registry();
  return std::any_of(metas.begin(), metas.end(), [&](const MetaPlannerRegistration& m) { return m.name == name; });
}

bool names_meta_planner(const std::vector<std::string>& names) {
  return std::any_of(names.begin(), names.end(), [](const std::string& n) { return is_meta_planner(n); });
}

std::vector<std::string> selectable_planner_names() {
  std::vector<std::string> names = planner_names();
  for (const auto& m : meta_planner_registry()) names.emplace_back(m.name);
  return names;
}

void check_selectable_planner(std::string_view name) {
  if (is_meta_planner(name)) return;
  const auto known = planner_names();
  if (std::find(known.begin(), known.end(), name) == known.end()) {
    fail("planner = '{}': unknown; choose from {}", name, fmt::join(selectable_planner_names(), ", "));
  }
}

std::unique_ptr<Planner> make_planner(std::string_view name, const PlannerOptions& options) {
  if (is_meta_planner(name)) {
    fail(
        "planner = '{}': a meta-planner plans through the simulator (sim::choose_plan, or auto in plan, run and "
        "simulate), not make_planner",
        name);
  }
  const PlannerRegistration& registration = find_planner(name);
  options.validate();
  std::unique_ptr<Planner> planner = registration.make(options);
  planner->registration_ = &registration;
  planner->options_ = options;
  return planner;
}

std::vector<OptionSpec> planner_option_specs() {
  std::vector<OptionSpec> specs;
  for (const auto& r : planner_registry()) {
    for (const auto& o : r.options) {
      if (std::none_of(specs.begin(), specs.end(), [&](const OptionSpec& s) { return s.name == o.name; })) {
        specs.push_back(o);
      }
    }
  }
  return specs;
}

const OptionSpec& find_planner_option(std::string_view name) {
  for (const auto& r : planner_registry()) {
    for (const auto& o : r.options) {
      if (o.name == name) return o;
    }
  }
  std::vector<std::string_view> names;
  for (const auto& o : planner_option_specs()) names.push_back(o.name);
  fail("planner option '{}': unknown; choose from {}", name, fmt::join(names, ", "));
}

}  // namespace fulcrum
