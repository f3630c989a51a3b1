// What `fulcrum run --simulate` prints and writes: predicted against measured times, per rank and pass.
#pragma once

#include "fulcrum/studies/sim_validation.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace fulcrum {

std::string validation_table(const std::vector<studies::SimValidation>& rows);
nlohmann::json validation_json(const std::vector<studies::SimValidation>& rows);

}  // namespace fulcrum
