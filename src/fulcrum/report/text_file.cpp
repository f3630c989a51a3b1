#include "fulcrum/report/text_file.hpp"

#include "fulcrum/core/error.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace fulcrum {

void write_text_file(const std::string& path, std::string_view text) {
  // stdio rather than ofstream: fopen/fwrite/fclose set errno, so the message can say why.
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) fail("path '{}': cannot be written ({})", path, std::strerror(errno));
  const std::size_t written = std::fwrite(text.data(), 1, text.size(), file);
  const int write_errno = errno;
  // fclose flushes the buffer, so a full disk may only show up here.
  const bool closed = std::fclose(file) == 0;
  if (written != text.size() || !closed) {
    fail_runtime("path '{}': write failed ({})", path, std::strerror(written != text.size() ? write_errno : errno));
  }
}

}  // namespace fulcrum
