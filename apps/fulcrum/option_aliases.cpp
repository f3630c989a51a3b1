#include "option_aliases.hpp"

#include "verbosity.hpp"

#include "fulcrum/core/error.hpp"

#include <fmt/format.h>

#include <utility>
#include <vector>

namespace fulcrum::cli {
namespace {

struct Alias {
  const CLI::Option *option, *canonical;
  std::string name, canonical_name;
};

std::vector<Alias>& registry() {
  static std::vector<Alias> aliases;
  return aliases;
}

}  // namespace

void deprecate(CLI::Option* option, const CLI::Option* canonical) {
  // Listed apart in --help rather than hidden: CLI11 gives a hidden option no name in its own messages
  // ("--cp-degree excludes ").
  option->group(kDeprecatedGroup);
  registry().push_back({option, canonical, option->get_name(), canonical->get_name()});
}

void check_deprecated_options() {
  for (const auto& alias : registry()) {
    if (alias.option->count() == 0) continue;
    if (alias.canonical->count() > 0) {
      fail("{} / {}: give one ({} is the old spelling of {})", alias.name, alias.canonical_name, alias.name,
           alias.canonical_name);
    }
    warn(fmt::format("{} is deprecated and goes in the next release: write {}", alias.name, alias.canonical_name));
  }
}

}  // namespace fulcrum::cli
