// `fulcrum plam` once answered "A subcommand is required": CLI11 takes an unknown first word for a stray
// positional. Name the word, and the subcommand the user probably meant.
#include "commands.hpp"

#include "fulcrum/core/text.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

namespace fulcrum::cli {

std::string unknown_subcommand_message(CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return {};
  const std::string word = argv[1];
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands(std::function<bool(CLI::App*)>())) names.push_back(sub->get_name());
  if (std::find(names.begin(), names.end(), word) != names.end()) return {};
  const std::string guess = closest_name(word, names);
  return fmt::format("'{}' is not a subcommand{}; the subcommands are {}", word,
                     guess.empty() ? "" : fmt::format(" (did you mean '{}'?)", guess), fmt::join(names, ", "));
}

}  // namespace fulcrum::cli
