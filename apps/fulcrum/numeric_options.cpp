// Numeric options reject values they cannot hold. An empty value ("--tolerance ''") converts to 0 in CLI11,
// silently: every numeric option refuses it. Integer options reject values they cannot hold. CLI11 (2.1) converts with
// strtoll / strtoull and checks neither errno nor the sign: "-1" for an unsigned option becomes 2^64 - 1 and
// "9223372036854775808" for a signed one becomes 2^63 - 1 (its own check catches only a 64-bit value that does not fit
// a narrower type). And strtoll's base 0 reads "010" as octal 8, silently: a leading zero is refused as well. One
// validator, added to every integer option of every subcommand, rejects all three before the conversion.
#include "commands.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>

namespace fulcrum::cli {
namespace {

// "" when CLI11's conversion of `text` will be exact or will fail by itself (not a whole number).
std::string integer_range_error(const std::string& text, bool is_unsigned) {
  const std::size_t digits = text.find_first_not_of("+-");
  if (digits != std::string::npos && digits + 1 < text.size() && text[digits] == '0' && text[digits + 1] >= '0' &&
      text[digits + 1] <= '9') {
    return fmt::format("{}: a leading 0 would read as octal; write the number without it", text);
  }
  const char* begin = text.c_str();
  char* end = nullptr;
  errno = 0;
  bool wraps = false;
  if (is_unsigned) {
    // strtoull accepts "-N" and negates it in unsigned arithmetic: only "-0" is exact.
    wraps = std::strtoull(begin, &end, 0) != 0 && text.find('-') != std::string::npos;
  } else {
    static_cast<void>(std::strtoll(begin, &end, 0));
  }
  const bool whole = end != begin && *end == '\0';
  if (!whole || (errno != ERANGE && !wraps)) return {};
  if (is_unsigned) return fmt::format("{}: must be in [0, {}]", text, std::numeric_limits<std::uint64_t>::max());
  return fmt::format("{}: must be in [{}, {}]", text, std::numeric_limits<std::int64_t>::min(),
                     std::numeric_limits<std::int64_t>::max());
}

}  // namespace

CLI::Validator in_range(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        char* end = nullptr;
        const double x = std::strtod(text.c_str(), &end);
        if (end == text.c_str() || *end != '\0') return {};  // not a number: CLI11's conversion says so
        if (!(x >= lo && x <= hi)) return fmt::format("{}: must be in [{}, {}]", text, lo, hi);
        return {};
      },
      std::string());
}

void reject_bad_numbers(CLI::App& app) {
  for (CLI::Option* option : app.get_options()) {
    // The type name is CLI11's own for integer targets ("INT" signed, "UINT" unsigned) and real ones
    // ("FLOAT"); planner flags that call themselves INT parse as double and are range-checked by their
    // option's declaration as well.
    const std::string type = option->get_type_name();
    const bool is_unsigned = type.starts_with("UINT");
    const bool is_integer = is_unsigned || type.starts_with("INT");
    if (!is_integer && !type.starts_with("FLOAT")) continue;
    option->check(CLI::Validator(
        [is_integer, is_unsigned](std::string& text) -> std::string {
          if (text.find_first_not_of(" \t") == std::string::npos) return "an empty value; give a number";
          return is_integer ? integer_range_error(text, is_unsigned) : std::string();
        },
        std::string()));
  }
  for (CLI::App* sub : app.get_subcommands(std::function<bool(CLI::App*)>())) reject_bad_numbers(*sub);
}

}  // namespace fulcrum::cli
