#include "fulcrum/plan/comm_mode.hpp"

#include "fulcrum/core/error.hpp"

namespace fulcrum {

const char* to_string(CommMode mode) {
  switch (mode) {
    case CommMode::kSingleStream: return "single-stream";
    case CommMode::kPingPong: return "pingpong";
    case CommMode::kSignal: return "signal";
  }
  FULCRUM_CHECK(false, "CommMode {} is not a mode", static_cast<int>(mode));
}

CommMode parse_comm_mode(std::string_view text, std::string_view field) {
  for (CommMode m : {CommMode::kSingleStream, CommMode::kPingPong, CommMode::kSignal}) {
    if (text == to_string(m)) return m;
  }
  fail("{} = '{}': must be one of single-stream, pingpong, signal", field, text);
}

}  // namespace fulcrum
