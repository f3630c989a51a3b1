#include "fulcrum/prefill/weights_file.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/prefill/test_model.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <vector>

namespace fulcrum::prefill {
namespace {

using testing::TempWeights;
using testing::test_model;

std::vector<char> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// The error's message, or "" when `f` does not throw a bad-input Error.
template <class F>
std::string bad_input(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.kind() == ErrorKind::kBadInput ? e.what() : std::string("not bad input: ") + e.what();
  }
  return "";
}

TEST(WeightsFile, RoundTripReadsWhatTheSeedWroteRowByRow) {
  const auto shape = test_model();
  const TempWeights a(shape, 7, "roundtrip-a"), b(shape, 7, "roundtrip-b"), c(shape, 8, "roundtrip-c");
  EXPECT_EQ(file_bytes(a.path()), file_bytes(b.path()));  // the seed decides every value
  EXPECT_NE(file_bytes(a.path()), file_bytes(c.path()));
  const WeightsFile file(a.path(), shape);
  EXPECT_EQ(file.seed(), 7U);
  EXPECT_EQ(static_cast<std::int64_t>(file_bytes(a.path()).size()), file.layout().file_bytes());

  // Head 5's rows read alone equal the same rows read with the whole tensor; values have the stated range.
  const auto rows = file.layout().rows(WeightTensor::kWq);
  std::vector<float> all(static_cast<std::size_t>(rows * shape.hidden));
  file.read_rows(1, WeightTensor::kWq, 0, rows, all.data());
  std::vector<float> head(static_cast<std::size_t>(shape.head_dim * shape.hidden));
  file.read_rows(1, WeightTensor::kWq, 5L * shape.head_dim, shape.head_dim, head.data());
  EXPECT_TRUE(std::equal(head.begin(), head.end(), all.begin() + 5L * shape.head_dim * shape.hidden));
  const double a_bound = std::sqrt(3.0 / shape.hidden);
  double sum_squares = 0;
  for (float x : all) {
    EXPECT_LE(std::abs(x), a_bound);
    sum_squares += static_cast<double>(x) * x;
  }
  EXPECT_NEAR(sum_squares / static_cast<double>(all.size()), 1.0 / shape.hidden, 0.1 / shape.hidden);
  std::vector<float> gain(static_cast<std::size_t>(shape.hidden));
  file.read_rows(shape.layers, WeightTensor::kAttnNorm, 0, 1, gain.data());  // the final norm
  for (float g : gain) {
    EXPECT_GE(g, 0.9F);
    EXPECT_LE(g, 1.1F);
  }
}

TEST(WeightsFile, BadFilesAreBadInputNamingTheFileAndField) {
  const auto shape = test_model();
  const TempWeights good(shape, 3, "bad-files");
  const auto bytes = file_bytes(good.path());
  const std::string path = good.path() + ".edited";

  EXPECT_NE(bad_input([&] {
              WeightsFile("/nonexistent/w.bin", shape);
            }).find("weights = '/nonexistent/w.bin': cannot be read"),
            std::string::npos);

  auto edited = [&](auto edit) {
    auto b = bytes;
    edit(b);
    write_bytes(path, b);
    return bad_input([&] { WeightsFile(path, shape); });
  };
  auto has = [&](const std::string& message, const std::string& part) {
    return message.find(path) != std::string::npos && message.find(part) != std::string::npos;
  };
  EXPECT_TRUE(has(edited([](auto& b) { b[0] = 'X'; }), "header.magic"));
  EXPECT_TRUE(has(edited([](auto& b) { b[8] = 9; }), "header.version = 9"));
  EXPECT_TRUE(has(edited([](auto& b) { b[12] = 1; }), "header.dtype = 1"));
  EXPECT_TRUE(has(edited([](auto& b) { b.resize(b.size() - 4); }), "size ="));
  EXPECT_TRUE(has(edited([](auto& b) { b.push_back(0); }), "size ="));
  EXPECT_TRUE(has(edited([](auto& b) { b.resize(10); }), "header"));

  // Another model's file: the first differing size is named.
  auto other = shape;
  other.q_heads = 4;
  const auto message = bad_input([&] { WeightsFile(good.path(), other); });
  EXPECT_NE(message.find("header.q_heads = 8"), std::string::npos) << message;
  other = shape;
  other.layers = 3;
  EXPECT_NE(bad_input([&] { WeightsFile(good.path(), other); }).find("header.layers = 2"), std::string::npos);
  std::filesystem::remove(path);

  EXPECT_NE(bad_input([&] { write_random_weights("/nonexistent/dir/w.bin", shape, 1); }).find("weights ="),
            std::string::npos);
}

}  // namespace
}  // namespace fulcrum::prefill
