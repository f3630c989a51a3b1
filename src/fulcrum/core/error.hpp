// Errors at Fulcrum's boundaries: one exception type, and one checking macro that names the place.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace fulcrum {

/// What kind of failure an Error reports; the CLI maps it to an exit code (bad input 2, the others 1).
///  - kInternal: a broken contract inside Fulcrum (a bug): FULCRUM_CHECK, and the default.
///  - kBadInput: the user's input is out of range; raised only where user input is checked (fail()).
///  - kRuntime: the environment failed (a rank died, a timeout, a file could not be written).
enum class ErrorKind { kInternal, kBadInput, kRuntime };
const char* to_string(ErrorKind kind);

/// The one exception type Fulcrum throws. Messages name the offending field, its value and the allowed
/// range, e.g. "ranks = 0: must be >= 1".
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, ErrorKind kind = ErrorKind::kInternal)
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
[[noreturn]] void throw_check_failure(const char* file, int line, const char* condition, const std::string& message);
}  // namespace detail

}  // namespace fulcrum

/// Internal invariant check: throws an internal Error carrying file:line, the failed condition and a
/// formatted explanation. For validating user input use fulcrum::fail with a field-naming message.
#define FULCRUM_CHECK(condition, ...)                                                                     \
  do {                                                                                                    \
    if (!(condition)) {                                                                                   \
      ::fulcrum::detail::throw_check_failure(__FILE__, __LINE__, #condition, ::fmt::format(__VA_ARGS__)); \
    }                                                                                                     \
  } while (false)
