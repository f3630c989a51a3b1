#include "fulcrum/core/error.hpp"

namespace fulcrum::detail {

void throw_check_failure(const char* file, int line, const char* condition, const std::string& message) {
  throw Error(fmt::format("{}:{}: check '{}' failed: {}", file, line, condition, message),
              ErrorKind::kRuntime);
}

}  // namespace fulcrum::detail
