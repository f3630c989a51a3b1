// A command's output files (--json, --csv, --svg, --trace, profile --out) and folders (demo --out,
// --save-plans): checked before the work starts, so a path that cannot be written fails at once, and
// written after it with every failure, a full disk included, reported the same way: a bad-input error
// (exit 2) on one line naming the option, e.g. "json = '/dev/full': write failed (No space left on device)".
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace fulcrum::cli {

/// Adds `--NAME PATH` to `cmd` storing into `path`; an empty PATH is refused while parsing (it would
/// otherwise mean "no output" and the command would end having written nothing).
CLI::Option* add_output_option(CLI::App& cmd, const std::string& name, std::string& path, const std::string& help);

/// Fails naming `option` unless a file can be written at `path`: not a directory, in a folder that exists
/// and takes new files. Leaves nothing behind: an existing file is opened for appending (not changed), a
/// new one created and removed again.
void check_output_file(std::string_view option, const std::string& path);
/// Creates the folder `path` (and its parents) now, failing naming `option` when it cannot.
void check_output_folder(std::string_view option, const std::string& path);

/// Replaces the file at `path` with `text`; every failure (open, write, the final flush) names `option`.
void write_output(std::string_view option, const std::string& path, std::string_view text);
/// `json` indented by 2, and a newline.
void write_output_json(std::string_view option, const std::string& path, const nlohmann::json& json);

}  // namespace fulcrum::cli
