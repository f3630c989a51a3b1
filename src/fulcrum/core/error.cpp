#include "fulcrum/core/error.hpp"

namespace fulcrum {

const char* to_string(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInternal: return "internal error";
    case ErrorKind::kBadInput: return "bad input";
    case ErrorKind::kRuntime: return "runtime failure";
  }
  return "error";
}

namespace detail {

void throw_check_failure(const char* file, int line, const char* condition, const std::string& message) {
  throw Error(fmt::format("internal error at {}:{}: check '{}' failed: {}", file, line, condition, message),
              ErrorKind::kInternal);
}

}  // namespace detail
}  // namespace fulcrum
