// What auto chose, in words: the lines `fulcrum plan` and `fulcrum simulate` print under their tables.
#pragma once

#include "fulcrum/sim/auto_choice.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace fulcrum {

/// "WHO: chose distca 15/16, dcp 1/16; runner-up ...; planning ...", then a line per candidate that sat
/// out a batch.
std::vector<std::string> auto_choice_lines(std::string_view who, const sim::AutoChoice& choice);

}  // namespace fulcrum
