// Summaries of repeated measurements.
#pragma once

#include <vector>

namespace fulcrum {

/// The middle value (the upper one of the two middles for an even count); the input must not be empty.
double median(std::vector<double> values);

}  // namespace fulcrum
