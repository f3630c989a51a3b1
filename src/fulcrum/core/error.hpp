// Errors at Fulcrum's boundaries: one exception type, and one checking macro that names the place.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace fulcrum {

/// What kind of failure an Error reports; the CLI maps it to an exit code (bad input 2, runtime 1).
enum class ErrorKind { kBadInput, kRuntime };

/// The one exception type Fulcrum throws. Messages name the offending field, its value and the allowed
/// range, e.g. "ranks = 0: must be >= 1".
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, ErrorKind kind = ErrorKind::kBadInput)
      : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const noexcept { return kind_; }

 private:
  ErrorKind kind_;
};

/// Throws a bad-input Error formatted with fmt.
template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...), ErrorKind::kBadInput);
}

/// Throws a runtime Error formatted with fmt.
template <typename... Args>
[[noreturn]] void fail_runtime(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...), ErrorKind::kRuntime);
}

namespace detail {
[[noreturn]] void throw_check_failure(const char* file, int line, const char* condition,
                                      const std::string& message);
}  // namespace detail

}  // namespace fulcrum

/// Internal invariant check: throws a runtime Error carrying file:line, the failed condition and a
/// formatted explanation. For validating user input use fulcrum::fail with a field-naming message.
#define FULCRUM_CHECK(condition, ...)                                                             \
  do {                                                                                            \
    if (!(condition)) {                                                                           \
      ::fulcrum::detail::throw_check_failure(__FILE__, __LINE__, #condition,                      \
                                             ::fmt::format(__VA_ARGS__));                         \
    }                                                                                             \
  } while (false)
