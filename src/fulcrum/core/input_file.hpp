// Reading an input file (a JSON document, a lengths file, a plan) whole, with the limits of a file that a
// user names: not a directory (which opens as a stream on Linux and fails only on its first read, with
// "basic_filebuf::underflow"), and not more than a bound, so /dev/zero or a mistaken multi-gigabyte file
// ends in an error naming it instead of exhausting memory.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace fulcrum {

/// The largest input file Fulcrum reads: 1 GiB (plans, JSON and length files are far smaller).
inline constexpr std::size_t kMaxInputFileBytes = std::size_t{1} << 30;

/// `path` itself, unless it is relative, starts with "data/" (the repository's bundled data:
/// data/hardware/cpu-local.json, data/models/NAME/config.json, data/heads/...) and does not exist from the
/// working directory: then the first that exists of $FULCRUM_DATA_DIR/REST, the installed copy beside the
/// running program (BIN/../share/fulcrum/REST: `cmake --install` and `pip install .` put it there) and the
/// source tree this build came from (REST after "data/"); else `path` unchanged, so errors name it as given.
std::string bundled_path(const std::string& path);

/// The bytes of the file at bundled_path(`path`). Bad-input Errors start with `label` (e.g. "dataset file 'x.txt'"):
/// "LABEL: cannot be read: REASON", "LABEL: is a directory, not a file", "LABEL: larger than N bytes";
/// a read that fails midway is a runtime Error.
std::string read_input_file(const std::string& path, std::string_view label,
                            std::size_t max_bytes = kMaxInputFileBytes);

}  // namespace fulcrum
