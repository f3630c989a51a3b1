#include "fulcrum/report/sim_validation_report.hpp"

#include "fulcrum/report/report_json.hpp"

#include "fulcrum/report/table.hpp"

#include <fmt/format.h>

namespace fulcrum {

std::string validation_table(const std::vector<studies::SimValidation>& rows) {
  Table t({"planner", "mode", "rank", "attention ms measured", "predicted", "error"});
  for (const auto& v : rows) {
    for (std::size_t r = 0; r < v.measured_attention_s.size(); ++r) {
      t.add_row({v.planner, v.mode, std::to_string(r), fmt::format("{:.1f}", 1e3 * v.measured_attention_s[r]),
                 fmt::format("{:.1f}", 1e3 * v.predicted_attention_s[r]),
                 fmt::format("{:+.1f}%", 100 * (v.predicted_attention_s[r] / v.measured_attention_s[r] - 1))});
    }
    t.add_row({v.planner, v.mode, "iteration", fmt::format("{:.1f}", 1e3 * v.measured_iteration_s),
               fmt::format("{:.1f}", 1e3 * v.predicted_iteration_s),
               fmt::format("{:+.1f}%", 100 * (v.predicted_iteration_s / v.measured_iteration_s - 1))});
  }
  return t.to_string();
}

nlohmann::json validation_json(const std::vector<studies::SimValidation>& rows) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& v : rows) {
    list.push_back({{"planner", v.planner},
                    {"mode", v.mode},
                    {"measured_attention_s", v.measured_attention_s},
                    {"predicted_attention_s", v.predicted_attention_s},
                    {"measured_iteration_s", v.measured_iteration_s},
                    {"predicted_iteration_s", v.predicted_iteration_s},
                    {"worst_attention_error", v.worst_attention_error()},
                    {"iteration_error", v.iteration_error()}});
  }
  nlohmann::json out = report_object();
  out["rows"] = std::move(list);
  return out;
}

}  // namespace fulcrum
