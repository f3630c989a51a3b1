#include "fulcrum/core/input_file.hpp"

#include "fulcrum/core/error.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace fulcrum {

std::string read_input_file(const std::string& path, std::string_view label, std::size_t max_bytes) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) fail("{}: is a directory, not a file", label);
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot be read: {}", label, std::strerror(errno));
  // In chunks up to the bound, so a device that never ends (/dev/zero) stops there.
  std::string text;
  constexpr std::size_t kChunk = std::size_t{1} << 16;
  while (in) {
    const std::size_t at = text.size();
    text.resize(at + kChunk);
    in.read(text.data() + at, static_cast<std::streamsize>(kChunk));
    text.resize(at + static_cast<std::size_t>(in.gcount()));
    if (text.size() > max_bytes) fail("{}: larger than {} bytes", label, max_bytes);
  }
  if (in.bad()) fail_runtime("{}: read failed: {}", label, std::strerror(errno));
  return text;
}

}  // namespace fulcrum
