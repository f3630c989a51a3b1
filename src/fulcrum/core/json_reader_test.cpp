#include "fulcrum/core/json_reader.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <functional>
#include <string>

namespace fulcrum {
namespace {

// The message of the Error `body` throws ("" if none), after checking it is a bad-input Error.
std::string error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kBadInput) << e.what();
    return e.what();
  }
  return "";
}

const char* kText = R"({"name": "x", "count": 3, "ratio": 0.5, "on": true, "link": {"latency_s": 1e-6},
                        "spans": [[0, 4], [4, 9]], "mode": "fast"})";

TEST(JsonReader, ReadsTypedFieldsAlongTheirPaths) {
  const JsonDocument doc = JsonDocument::parse(kText, "cfg.json", "config");
  const JsonValue root = doc.root();
  EXPECT_EQ(root.path(), "config");
  EXPECT_EQ(root.at("name").string(), "x");
  EXPECT_EQ(root.at("count").integer<int>(1, 10), 3);
  EXPECT_EQ(root.at("ratio").number(0, 1), 0.5);
  EXPECT_TRUE(root.at("on").boolean());
  EXPECT_EQ(root.at("link").at("latency_s").positive(), 1e-6);
  EXPECT_EQ(root.at("link").at("latency_s").path(), "config.link.latency_s");
  const auto spans = root.at("spans").elements(1, 4);
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[1].elements(2, 2)[1].path(), "config.spans[1][1]");
  EXPECT_EQ(spans[1].elements(2, 2)[1].integer<long>(), 9);
  EXPECT_TRUE(root.has("mode"));
  EXPECT_FALSE(root.find("absent").has_value());
  EXPECT_EQ(root.find("count")->integer<int>(), 3);
  EXPECT_EQ(root.at("mode").parsed([](const std::string& s) { return s.size(); }), 4u);
  root.only_keys({"name", "count", "ratio", "on", "link", "spans", "mode"});
}

TEST(JsonReader, ErrorsNameTheFileThePathTheValueAndTheRule) {
  const JsonDocument doc = JsonDocument::parse(kText, "cfg.json", "config");
  const JsonValue root = doc.root();
  const std::pair<std::function<void()>, std::string> cases[] = {
      {[&] { root.at("missing"); }, "cfg.json: config.missing: missing"},
      {[&] { root.at("count").integer<int>(5); }, "cfg.json: config.count = 3: must be >= 5"},
      {[&] { root.at("count").integer<int>(0, 2); }, "cfg.json: config.count = 3: must be in [0, 2]"},
      {[&] { root.at("count").integer<int>(-9, 2); }, "cfg.json: config.count = 3: must be in [-9, 2]"},
      {[&] { root.at("ratio").integer<int>(); }, "cfg.json: config.ratio = 0.5: must be an integer"},
      {[&] { root.at("ratio").number(1); }, "cfg.json: config.ratio = 0.5: must be >= 1"},
      {[&] { root.at("ratio").number(0, 0.25); }, "cfg.json: config.ratio = 0.5: must be in [0, 0.25]"},
      {[&] { root.at("name").number(); }, "cfg.json: config.name = \"x\": must be a number"},
      {[&] { root.at("count").string(); }, "cfg.json: config.count = 3: must be a string"},
      {[&] { root.at("count").boolean(); }, "cfg.json: config.count = 3: must be true or false"},
      {[&] { root.at("name").at("x"); }, "cfg.json: config.name = \"x\": must be an object"},
      {[&] { root.at("spans").elements(3); }, "cfg.json: config.spans = [[0,4],[4,9]]: must be an array"},
      {[&] { root.at("spans").elements(0, 9)[0].elements(3, 3, "[a, b, c]"); },
       "cfg.json: config.spans[0] = [0,4]: must be [a, b, c]"},
      {[&] { root.only_keys({"name"}); }, "cfg.json: config.count: unknown field; expected name"},
      {[&] { root.at("link").at("latency_s").fail_because("too slow"); },
       "cfg.json: config.link.latency_s = 1e-06: too slow"},
      {[&] { root.at("mode").parsed([](const std::string&) -> int { fail("must be slow or safe"); }); },
       "cfg.json: config.mode = 'fast': must be slow or safe"},
  };
  for (const auto& [body, message] : cases) EXPECT_EQ(error_of(body), message);
}

TEST(JsonReader, IntegersOutsideTheTypeAndHugeValuesAreRejected) {
  const JsonDocument doc = JsonDocument::parse(R"({"big": 10000000000, "huge": 18446744073709551615})", "", "j");
  EXPECT_EQ(error_of([&] { doc.root().at("big").integer<int>(); }),
            "j.big = 10000000000: must be in [-2147483648, 2147483647]");
  EXPECT_EQ(doc.root().at("big").integer<long>(), 10000000000L);
  // Past the type's top with only a lower bound given: the range names the top (it said "must be >= 1").
  EXPECT_EQ(error_of([&] { doc.root().at("big").integer<int>(1); }), "j.big = 10000000000: must be in [1, 2147483647]");
  EXPECT_EQ(error_of([&] { JsonDocument::parse(R"({"n": 0})", "", "j").root().at("n").integer<int>(1); }),
            "j.n = 0: must be >= 1");
  EXPECT_NE(error_of([&] { doc.root().at("huge").integer<long>(); }).find("j.huge = 18446744073709551615"),
            std::string::npos);
}

// A number beyond double is the parser's out_of_range, not its parse_error: still bad input naming the
// file (fuzz/lengths_fuzz found it escaping as an unrelated exception).
TEST(JsonReader, NumbersBeyondDoubleAreBadInput) {
  const std::string message = error_of([] { JsonDocument::parse("[77e7777]", "lengths.json", "lengths"); });
  EXPECT_EQ(message.rfind("lengths.json: not JSON: ", 0), 0u) << message;
}

// A file nested 100,000 deep (200 KB) overflowed the parser's stack: anything past 512 levels is refused
// before parsing, naming where; 512 levels still parse, and brackets inside strings do not count.
TEST(JsonReader, NestingPastTheLimitIsRefusedBeforeParsing) {
  for (const auto& [open, close] : {std::pair{"[", "]"}, std::pair{"{\"a\":", "}"}}) {
    std::string deep;
    for (int i = 0; i < 100000; ++i) deep += open;
    deep += "1";
    for (int i = 0; i < 100000; ++i) deep += close;
    EXPECT_EQ(error_of([&] {
                JsonDocument::parse(deep, "model.json", "model");
              }).rfind("model.json: nested deeper than the 512 levels Fulcrum reads (at line 1, column ", 0),
              0u);
  }
  std::string ok = "\"[[[{{{\\\"\"";
  for (int i = 0; i < 512; ++i) ok = "[" + ok + "]";
  EXPECT_NO_THROW(JsonDocument::parse(ok, "ok.json", "x"));
  EXPECT_EQ(error_of([&] { JsonDocument::parse("\n[" + ok + "]", "", "x"); }),
            "nested deeper than the 512 levels Fulcrum reads (at line 2, column 513)");
}

// A directory opens as a stream on Linux; reading it must be an error naming it, not "basic_filebuf::underflow".
TEST(JsonReader, ADirectoryIsNamed) {
  const std::string dir = ::testing::TempDir();
  EXPECT_EQ(error_of([&] { JsonDocument::read_file(dir, "hardware"); }), dir + ": is a directory, not a file");
}

TEST(JsonReader, ParseAndFileErrorsNameTheFileAndThePosition) {
  EXPECT_EQ(error_of([] {
              JsonDocument::parse("{\n  \"a\": 1,\n  oops\n}", "cfg.json", "c");
            }).rfind("cfg.json: not JSON: parse error at line 3, column ", 0),
            0u)
      << error_of([] { JsonDocument::parse("{\n  \"a\": 1,\n  oops\n}", "cfg.json", "c"); });
  EXPECT_EQ(error_of([] {
              JsonDocument::read_file("/nonexistent/cfg.json", "c");
            }).rfind("/nonexistent/cfg.json: cannot be read", 0),
            0u);
  const std::string path = ::testing::TempDir() + "/json_reader_test.json";
  std::ofstream(path) << R"({"rows": -3})";
  const JsonDocument doc = JsonDocument::read_file(path, "table");
  EXPECT_EQ(error_of([&] { doc.root().at("rows").integer<int>(0); }), path + ": table.rows = -3: must be >= 0");
  std::remove(path.c_str());
  // JSON handed over in memory has no file: errors start with the path.
  const nlohmann::json j = {{"x", "y"}};
  EXPECT_EQ(error_of([&] { JsonValue(j, "", "obj").at("x").integer<int>(); }), "obj.x = \"y\": must be an integer");
}

}  // namespace
}  // namespace fulcrum
