// Writing report files (--svg, --trace) whole, with an error that names the path when it cannot be
// written, so a typo in a directory fails loudly instead of silently producing nothing.
#pragma once

#include <string>
#include <string_view>

namespace fulcrum {

/// Replaces the file at `path` with `text`, byte for byte. Throws a bad-input Error naming the path
/// when it cannot be opened (missing directory, no permission) and a runtime Error when the write
/// itself fails (disk full).
void write_text_file(const std::string& path, std::string_view text);

}  // namespace fulcrum
