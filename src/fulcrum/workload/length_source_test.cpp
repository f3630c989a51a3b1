#include "fulcrum/workload/length_source.hpp"

#include "fulcrum/core/error.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <numeric>

namespace fulcrum {
namespace {

std::vector<Tokens> draw(LengthSource& source, int n) {
  std::vector<Tokens> out(n);
  for (auto& v : out) v = source.next();
  return out;
}

TEST(LengthSource, EverySourceIsSeededAndDeterministic) {
  for (const char* spec : {"pretrain", "prolong", "uniform:1:100", "lognormal:7:1"}) {
    auto a = make_length_source(spec, 9, 65536);
    auto b = make_length_source(spec, 9, 65536);
    auto c = make_length_source(spec, 10, 65536);
    const auto da = draw(*a, 500);
    EXPECT_EQ(da, draw(*b, 500)) << spec;
    EXPECT_NE(da, draw(*c, 500)) << spec;
  }
}

TEST(LengthSource, PretrainReproducesTheSampleStatistics) {
  // The kept short half has the sample's short median (3,210 tokens); about 2.1% of draws are the 4x
  // upsampled long documents (4 * 528 of 0.5 * 98,991 + 4 * 528).
  auto source = make_length_source("pretrain", 1, 65536);
  auto lengths = draw(*source, 49495 + 2112);  // one full pass over the pool
  const auto long_count = std::count_if(lengths.begin(), lengths.end(), [](Tokens t) { return t >= 65536; });
  EXPECT_EQ(long_count, 2112);
  for (Tokens t : lengths) EXPECT_EQ(t % 16, 0);
  std::vector<Tokens> short_lengths;
  for (Tokens t : lengths)
    if (t < 65536) short_lengths.push_back(t);
  std::nth_element(short_lengths.begin(), short_lengths.begin() + short_lengths.size() / 2, short_lengths.end());
  EXPECT_NEAR(static_cast<double>(short_lengths[short_lengths.size() / 2]), 3210.0, 32.0);
}

TEST(LengthSource, ElongationScalesWithTokensPerRank) {
  auto base = make_length_source("pretrain", 4, 65536);
  auto doubled = make_length_source("pretrain", 4, 131072);
  for (int i = 0; i < 200; ++i) {
    const Tokens a = base->next(), b = doubled->next();
    EXPECT_NEAR(static_cast<double>(b), 2.0 * static_cast<double>(a), 32.0);
  }
}

TEST(LengthSource, ProlongReplacesSomeLongDocumentsByTheElongatedCap) {
  auto source = make_length_source("prolong", 3, 131072);
  int capped = 0, long_docs = 0;
  for (int i = 0; i < 38966 + 188; ++i) {
    const Tokens t = source->next();
    if (t >= 131072) ++long_docs;
    if (t == 131072) ++capped;
  }
  EXPECT_EQ(long_docs, 188);  // 47 long documents, 4x
  EXPECT_GT(capped, 188 * 0.3 - 4 * std::sqrt(188 * 0.21));
  EXPECT_LT(capped, 188 * 0.3 + 4 * std::sqrt(188 * 0.21));
}

TEST(LengthSource, UniformStaysInRange) {
  auto source = make_length_source("uniform:5:9", 1, 1024);
  for (Tokens t : draw(*source, 1000)) {
    EXPECT_GE(t, 5);
    EXPECT_LE(t, 9);
  }
}

TEST(LengthSource, FileSourceReadsLinesAndJsonAndDrawsEveryLengthOncePerPass) {
  const std::string lines_path = ::testing::TempDir() + "/lengths.txt";
  const std::string json_path = ::testing::TempDir() + "/lengths.json";
  std::ofstream(lines_path) << "10\n 20 \n\n30\n";
  std::ofstream(json_path) << "[10, 20, 30]";
  for (const auto& path : {lines_path, json_path}) {
    auto source = make_length_source("file:" + path, 5, 1024);
    auto pass = draw(*source, 3);
    std::sort(pass.begin(), pass.end());
    EXPECT_EQ(pass, (std::vector<Tokens>{10, 20, 30}));
  }
}

TEST(LengthSource, BadSpecsNameTheField) {
  auto expect_error = [](const std::string& spec, const std::string& needle) {
    try {
      make_length_source(spec, 1, 1024);
      ADD_FAILURE() << spec << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_EQ(e.kind(), ErrorKind::kBadInput);
    }
  };
  expect_error("uniform:0:5", "dataset");
  expect_error("uniform:9:5", "MIN <= MAX");
  expect_error("uniform:a:5", "MIN");
  expect_error("lognormal:1:-1", "SIGMA");
  expect_error("zipf", "expected pretrain");
  expect_error("file:/nonexistent/lengths.txt", "cannot be read");
  const std::string bad = ::testing::TempDir() + "/bad.txt";
  std::ofstream(bad) << "10\n-4\n";
  expect_error("file:" + bad, "must be >= 1");
  std::ofstream(bad) << "10\nabc\n";
  expect_error("file:" + bad, "line 2");
  const std::string bad_json = ::testing::TempDir() + "/bad.json";
  std::ofstream(bad_json) << "[10, 20, -4]";
  expect_error("file:" + bad_json, bad_json + ": lengths[2] = -4: must be >= 1");
  std::ofstream(bad_json) << "[10, 2.5]";
  expect_error("file:" + bad_json, bad_json + ": lengths[1] = 2.5: must be an integer");
  std::ofstream(bad_json) << "[10, 20";
  expect_error("file:" + bad_json, bad_json + ": not JSON: parse error at line 1");
}

}  // namespace
}  // namespace fulcrum
