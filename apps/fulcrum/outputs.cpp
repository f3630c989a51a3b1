#include "outputs.hpp"

#include "fulcrum/core/error.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace fulcrum::cli {

CLI::Option* add_output_option(CLI::App& cmd, const std::string& name, std::string& path, const std::string& help) {
  return cmd.add_option("--" + name, path, help)
      ->check(CLI::Validator(
          [](const std::string& value) {
            return value.empty() ? std::string("must name a path, not ''") : std::string();
          },
          "PATH"));
}

void check_output_file(std::string_view option, const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) fail("{} = '{}': is a directory, not a file", option, path);
  const bool existed = fs::exists(path, ec);
  // "a" neither truncates an existing file nor writes to it; a device (/dev/null, /dev/full) opens too.
  std::FILE* file = std::fopen(path.c_str(), "ab");
  if (file == nullptr) fail("{} = '{}': cannot be written ({})", option, path, std::strerror(errno));
  std::fclose(file);
  if (!existed) fs::remove(path, ec);
}

void check_output_folder(std::string_view option, const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec || !fs::is_directory(path)) {
    fail("{} = '{}': cannot create the folder ({})", option, path, ec ? ec.message() : "a file of that name exists");
  }
  // A folder that exists but takes no files (permissions, a read-only or virtual file system).
  check_output_file(option, (fs::path(path) / ".fulcrum-write-check").string());
}

void write_output(std::string_view option, const std::string& path, std::string_view text) {
  // stdio rather than ofstream: fopen, fwrite and fclose set errno, so the message can say why.
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) fail("{} = '{}': cannot be written ({})", option, path, std::strerror(errno));
  const std::size_t written = std::fwrite(text.data(), 1, text.size(), file);
  const int write_errno = errno;
  // fclose flushes the buffer, so a full disk often shows only here.
  const bool closed = std::fclose(file) == 0;
  if (written != text.size() || !closed) {
    fail("{} = '{}': write failed ({})", option, path, std::strerror(written != text.size() ? write_errno : errno));
  }
}

void write_output_json(std::string_view option, const std::string& path, const nlohmann::json& json) {
  write_output(option, path, json.dump(2) + "\n");
}

}  // namespace fulcrum::cli
