// Old spellings of options, kept for one release as hidden aliases that warn: a renamed flag does not
// break a user's scripts at once, and says what to write instead.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace fulcrum::cli {

/// The --help group the old spellings are listed in.
inline constexpr const char* kDeprecatedGroup = "Deprecated (going in the next release)";

/// Registers `option` (listed under kDeprecatedGroup) as the deprecated spelling of `canonical`.
void deprecate(CLI::Option* option, const CLI::Option* canonical);

/// `old_flag` takes a value into `target` as `canonical` does; see deprecate().
template <typename T>
CLI::Option* add_deprecated_alias(CLI::App& cmd, const std::string& old_flag, CLI::Option* canonical, T& target) {
  CLI::Option* option = cmd.add_option(old_flag, target, "deprecated: " + canonical->get_name());
  deprecate(option, canonical);
  return option;
}

/// After parsing, for every deprecated spelling the command line used: bad input when the new spelling is
/// also given, else "fulcrum: warning: --systems is deprecated and goes in the next release: write
/// --planners" (verbosity.hpp's warn).
void check_deprecated_options();

}  // namespace fulcrum::cli
