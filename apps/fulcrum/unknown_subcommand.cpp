// Words of the command line that name nothing: `fulcrum plam` once answered "A subcommand is required"
// (CLI11 takes an unknown first word for a stray positional), and `fulcrum plan --planer distca` "The
// following arguments were not expected". Name the word, and what the user probably meant.
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

std::string unknown_option_message(CLI::App& app, int argc, char** argv) {
  CLI::App* command = &app;
  std::string path = "fulcrum";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") break;
    if (arg.rfind("--", 0) != 0) {  // a value, or the next subcommand down
      for (CLI::App* sub : command->get_subcommands(std::function<bool(CLI::App*)>())) {
        if (sub->get_name() == arg) {
          command = sub;
          path += " " + arg;
        }
      }
      continue;
    }
    const std::string name = arg.substr(0, arg.find('='));
    std::vector<std::string> known;
    for (const CLI::Option* option : command->get_options()) {
      for (const std::string& long_name : option->get_lnames()) known.push_back("--" + long_name);
    }
    if (std::find(known.begin(), known.end(), name) != known.end()) continue;
    const std::string guess = closest_name(name, known);
    return fmt::format("{}: unknown option '{}'{}; `{} --help` lists the options", path, name,
                       guess.empty() ? "" : fmt::format(" (did you mean '{}'?)", guess), path);
  }
  return {};
}

}  // namespace fulcrum::cli
