#include "fulcrum/report/chrome_trace.hpp"

#include "fulcrum/core/error.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <vector>

namespace fulcrum {
namespace {

using nlohmann::json;
using runtime::Timeline;
using runtime::TimelineEvent;
using runtime::Track;

// Two ranks given out of order, rank 1 running ping-pong (two comm streams); the earliest event starts
// at 2.0 s. Times are sums of powers of two so the expected microseconds are exact.
Timeline sample_timeline() {
  Timeline t;
  t.events.push_back({1, Track::kComm, 1, "dispatch", 2.25, 2.75, 4096, 0});
  t.events.push_back({0, Track::kCompute, 0, "attention", 2.5, 3.0, 0, 1e12});
  t.events.push_back({1, Track::kCompute, 1, "reduce", 3.0, 3.125, 2048, 0});
  t.events.push_back({1, Track::kComm, 0, "dispatch", 2.0, 2.5, 8192, 0});
  t.events.push_back({1, Track::kCompute, 0, "attention", 2.5, 3.0, 0, 5e11});
  return t;
}

std::vector<json> with_phase(const json& trace, const std::string& ph) {
  std::vector<json> out;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == ph) out.push_back(e);
  }
  return out;
}

TEST(ChromeTrace, WritesProcessAndThreadMetadataSortedByRank) {
  const json trace = chrome_trace(sample_timeline());
  EXPECT_EQ(trace["displayTimeUnit"], "ms");
  const auto meta = with_phase(trace, "M");
  auto m = [](const char* name, int pid, int tid, json args) {
    return json{{"name", name}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", std::move(args)}};
  };
  const std::vector<json> expected = {
      m("process_name", 0, 0, {{"name", "rank 0"}}),           m("process_sort_index", 0, 0, {{"sort_index", 0}}),
      m("thread_name", 0, 0, {{"name", "compute"}}),           m("thread_sort_index", 0, 0, {{"sort_index", 0}}),
      m("process_name", 1, 0, {{"name", "rank 1"}}),           m("process_sort_index", 1, 0, {{"sort_index", 1}}),
      m("thread_name", 1, 0, {{"name", "compute"}}),           m("thread_sort_index", 1, 0, {{"sort_index", 0}}),
      m("thread_name", 1, 1, {{"name", "comm nano-batch 0"}}), m("thread_sort_index", 1, 1, {{"sort_index", 1}}),
      m("thread_name", 1, 2, {{"name", "comm nano-batch 1"}}), m("thread_sort_index", 1, 2, {{"sort_index", 2}}),
  };
  EXPECT_EQ(meta, expected);
}

TEST(ChromeTrace, WritesCompleteEventsInMicrosecondsFromTheEarliestEvent) {
  const auto events = with_phase(chrome_trace(sample_timeline()), "X");
  auto x = [](const char* name, const char* cat, int pid, int tid, double ts, double dur, double bytes, double flops,
              int stream) {
    return json{
        {"name", name}, {"cat", cat}, {"ph", "X"},  {"pid", pid},
        {"tid", tid},   {"ts", ts},   {"dur", dur}, {"args", {{"bytes", bytes}, {"flops", flops}, {"stream", stream}}}};
  };
  const std::vector<json> expected = {
      x("attention", "compute", 0, 0, 500000, 500000, 0, 1e12, 0),
      x("attention", "compute", 1, 0, 500000, 500000, 0, 5e11, 0),
      x("reduce", "compute", 1, 0, 1000000, 125000, 2048, 0, 1),
      x("dispatch", "comm", 1, 1, 0, 500000, 8192, 0, 0),
      x("dispatch", "comm", 1, 2, 250000, 500000, 4096, 0, 1),
  };
  EXPECT_EQ(events, expected);
}

TEST(ChromeTrace, RoundsToNanosecondsAndKeepsAdjacentEventsAdjacent) {
  Timeline t;
  t.events.push_back({0, Track::kCompute, 0, "copy", 0.1, 0.3, 0, 0});
  t.events.push_back({0, Track::kCompute, 0, "copy", 0.3, 0.7000000001, 0, 0});
  const auto events = with_phase(chrome_trace(t), "X");
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0]["ts"], 0.0);
  EXPECT_EQ(events[0]["dur"], 200000.0);
  EXPECT_EQ(events[1]["ts"], 200000.0);
  EXPECT_EQ(events[1]["dur"], 400000.0);
  // The shortest round-trip text of the rounded values has no binary-fraction noise.
  EXPECT_EQ(events[1].dump().find("99999"), std::string::npos) << events[1].dump();
}

TEST(ChromeTrace, UsesGivenProcessNames) {
  const std::vector<std::string> names = {"node0/gpu0", "node0/gpu1"};
  const auto meta = with_phase(chrome_trace(sample_timeline(), names), "M");
  EXPECT_EQ(meta[0]["args"]["name"], "node0/gpu0");
  EXPECT_EQ(meta[4]["args"]["name"], "node0/gpu1");
  const std::vector<std::string> too_few = {"only one"};
  EXPECT_THROW(chrome_trace(sample_timeline(), too_few), Error);
}

TEST(ChromeTrace, EmptyTimelineIsAnEmptyTrace) {
  const json trace = chrome_trace(Timeline{});
  EXPECT_TRUE(trace["traceEvents"].is_array());
  EXPECT_TRUE(trace["traceEvents"].empty());
}

TEST(ChromeTrace, RejectsBadEventsNamingTheField) {
  auto message = [](TimelineEvent e) {
    Timeline t;
    t.events.push_back({0, Track::kCompute, 0, "ok", 0, 1, 0, 0});
    t.events.push_back(std::move(e));
    try {
      chrome_trace(t);
    } catch (const Error& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message({0, Track::kCompute, 0, "x", 2, 1, 0, 0}).rfind("events[1].end_s = 1", 0), 0u);
  EXPECT_EQ(message({-1, Track::kCompute, 0, "x", 0, 1, 0, 0}).rfind("events[1].rank = -1", 0), 0u);
  EXPECT_EQ(message({0, Track::kComm, -2, "x", 0, 1, 0, 0}).rfind("events[1].stream = -2", 0), 0u);
  EXPECT_EQ(message({0, Track::kComm, 0, "x", std::nan(""), 1, 0, 0}).rfind("events[1].start_s", 0), 0u);
}

TEST(ChromeTrace, WritesTheFileAndNamesAnUnwritablePath) {
  const auto path = (std::filesystem::temp_directory_path() / "fulcrum_chrome_trace_test.json").string();
  write_chrome_trace(sample_timeline(), path);
  std::ifstream in(path);
  EXPECT_EQ(json::parse(in), chrome_trace(sample_timeline()));
  std::filesystem::remove(path);
  const std::string bad = "/nonexistent-fulcrum-dir/trace.json";
  try {
    write_chrome_trace(sample_timeline(), bad);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace fulcrum
