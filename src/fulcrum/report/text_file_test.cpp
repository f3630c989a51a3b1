#include "fulcrum/report/text_file.hpp"

#include "fulcrum/core/error.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace fulcrum {
namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

TEST(WriteTextFile, ReplacesTheFileByteForByte) {
  const auto path = (std::filesystem::temp_directory_path() / "fulcrum_text_file_test.txt").string();
  write_text_file(path, "first, longer content\n");
  write_text_file(path, std::string("a\0b\r\n", 5));
  EXPECT_EQ(read_all(path), std::string("a\0b\r\n", 5));
  std::filesystem::remove(path);
}

TEST(WriteTextFile, NamesThePathWhenItCannotBeWritten) {
  const std::string path = "/nonexistent-fulcrum-dir/out.svg";
  try {
    write_text_file(path, "x");
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kBadInput);
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace fulcrum
