#include "fulcrum/core/input_file.hpp"

#include "fulcrum/core/error.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace fulcrum {
namespace {

namespace fs = std::filesystem;

// Runs the test from a temporary working directory (where no data/ exists) and restores the old one.
class ElsewhereTest : public ::testing::Test {
 protected:
  void SetUp() override {
    old_ = fs::current_path();
    dir_ = fs::temp_directory_path() / "fulcrum-input-file-test";
    fs::create_directories(dir_ / "own" / "models" / "x");
    std::ofstream(dir_ / "own" / "models" / "x" / "config.json") << "{}";
    fs::current_path(dir_);
    unsetenv("FULCRUM_DATA_DIR");
  }
  void TearDown() override {
    unsetenv("FULCRUM_DATA_DIR");
    fs::current_path(old_);
    fs::remove_all(dir_);
  }
  fs::path old_, dir_;
};

TEST_F(ElsewhereTest, BundledDataIsFoundFromAnyWorkingDirectory) {
  // The source tree's copy (nothing is installed beside the test binary).
  const std::string found = bundled_path("data/models/tiny/config.json");
  EXPECT_NE(found, "data/models/tiny/config.json");
  EXPECT_TRUE(fs::exists(found)) << found;
  EXPECT_NO_THROW(read_input_file("data/hardware/cpu-local.json", "hardware"));
}

TEST_F(ElsewhereTest, FulcrumDataDirComesFirstAndOtherPathsAreLeftAlone) {
  setenv("FULCRUM_DATA_DIR", (dir_ / "own").c_str(), 1);
  EXPECT_EQ(bundled_path("data/models/x/config.json"), (dir_ / "own" / "models" / "x" / "config.json").string());
  EXPECT_EQ(bundled_path("own/models/x/config.json"), "own/models/x/config.json");  // not under data/
  EXPECT_EQ(bundled_path("data/nothing.json"), "data/nothing.json");                // found nowhere: as given
  fs::create_directories("data/models/tiny");
  std::ofstream("data/models/tiny/config.json") << "{}";
  EXPECT_EQ(bundled_path("data/models/tiny/config.json"), "data/models/tiny/config.json");  // the user's own
  try {
    read_input_file("data/nothing.json", "model 'data/nothing.json'");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model 'data/nothing.json': cannot be read"), std::string::npos);
  }
}

}  // namespace
}  // namespace fulcrum
