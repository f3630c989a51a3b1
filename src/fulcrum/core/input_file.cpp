#include "fulcrum/core/input_file.hpp"

#include "fulcrum/core/error.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

namespace fulcrum {

std::string bundled_path(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  constexpr std::string_view kPrefix = "data/";
  if (!path.starts_with(kPrefix) || fs::exists(path, ec)) return path;
  const fs::path rest = path.substr(kPrefix.size());
  std::vector<fs::path> roots;
  if (const char* dir = std::getenv("FULCRUM_DATA_DIR"); dir != nullptr && *dir != '\0') roots.emplace_back(dir);
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) roots.push_back(exe.parent_path().parent_path() / "share" / "fulcrum");
  roots.emplace_back(FULCRUM_SOURCE_DATA_DIR);
  for (const auto& root : roots) {
    const fs::path candidate = root / rest;
    if (fs::exists(candidate, ec)) return candidate.string();
  }
  return path;
}

std::string read_input_file(const std::string& given, std::string_view label, std::size_t max_bytes) {
  const std::string path = bundled_path(given);
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
