#include "fulcrum/report/chrome_trace.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/report/text_file.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

namespace fulcrum {
namespace {

using runtime::Timeline;
using runtime::TimelineEvent;
using runtime::Track;

int track_id(const TimelineEvent& event) { return event.track == Track::kCompute ? 0 : 1 + event.stream; }

std::string track_name(int tid) { return tid == 0 ? "compute" : fmt::format("comm nano-batch {}", tid - 1); }

void validate(const Timeline& timeline) {
  for (std::size_t i = 0; i < timeline.events.size(); ++i) {
    const auto& e = timeline.events[i];
    if (e.rank < 0) fail("events[{}].rank = {}: must be >= 0", i, e.rank);
    if (e.stream < 0) fail("events[{}].stream = {}: must be >= 0", i, e.stream);
    if (!std::isfinite(e.start_s)) fail("events[{}].start_s = {}: must be finite", i, e.start_s);
    if (!std::isfinite(e.end_s) || e.end_s < e.start_s) {
      fail("events[{}].end_s = {}: must be finite and >= start_s = {}", i, e.end_s, e.start_s);
    }
  }
}

// Whole nanoseconds: seconds-to-microseconds products such as 0.3 * 1e6 are not exact, and
// "299999.99999999994" in a trace helps nobody. Durations are differences of rounded ends, so
// back-to-back events stay back to back.
long long to_ns(double seconds) { return std::llround(seconds * 1e9); }
double ns_to_us(long long ns) { return static_cast<double>(ns) / 1e3; }

nlohmann::json metadata(const char* name, int pid, int tid, nlohmann::json args) {
  return {{"name", name}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", std::move(args)}};
}

}  // namespace

nlohmann::json chrome_trace(const Timeline& timeline, std::span<const std::string> process_names) {
  validate(timeline);
  // Which tracks each rank uses, in rank then tid order; metadata is written only for those.
  std::map<int, std::set<int>> tracks;
  for (const auto& e : timeline.events) tracks[e.rank].insert(track_id(e));
  if (!process_names.empty() && !tracks.empty() && tracks.rbegin()->first >= static_cast<int>(process_names.size())) {
    fail("process_names: {} names, but the timeline has rank {}", process_names.size(), tracks.rbegin()->first);
  }

  auto events = nlohmann::json::array();
  for (const auto& [rank, tids] : tracks) {
    const std::string name = process_names.empty() ? fmt::format("rank {}", rank) : process_names[rank];
    events.push_back(metadata("process_name", rank, 0, {{"name", name}}));
    // Without a sort index viewers order processes by name, which puts "rank 10" before "rank 2".
    events.push_back(metadata("process_sort_index", rank, 0, {{"sort_index", rank}}));
    for (int tid : tids) {
      events.push_back(metadata("thread_name", rank, tid, {{"name", track_name(tid)}}));
      events.push_back(metadata("thread_sort_index", rank, tid, {{"sort_index", tid}}));
    }
  }

  // Sorted by rank, track, start, and longest first at equal starts, so an enclosing event precedes
  // what it encloses and the file reads in order.
  std::vector<const TimelineEvent*> order;
  order.reserve(timeline.events.size());
  for (const auto& e : timeline.events) order.push_back(&e);
  std::stable_sort(order.begin(), order.end(), [](const TimelineEvent* a, const TimelineEvent* b) {
    return std::make_tuple(a->rank, track_id(*a), a->start_s, -a->end_s) <
           std::make_tuple(b->rank, track_id(*b), b->start_s, -b->end_s);
  });
  double origin_s = 0;
  if (!order.empty()) {
    origin_s = std::min_element(timeline.events.begin(), timeline.events.end(), [](const auto& a, const auto& b) {
                 return a.start_s < b.start_s;
               })->start_s;
  }
  for (const TimelineEvent* e : order) {
    const long long start_ns = to_ns(e->start_s - origin_s);
    const long long end_ns = to_ns(e->end_s - origin_s);
    events.push_back({{"name", e->name},
                      {"cat", e->track == Track::kCompute ? "compute" : "comm"},
                      {"ph", "X"},
                      {"pid", e->rank},
                      {"tid", track_id(*e)},
                      {"ts", ns_to_us(start_ns)},
                      {"dur", ns_to_us(end_ns - start_ns)},
                      {"args", {{"bytes", e->bytes}, {"flops", e->flops}, {"stream", e->stream}}}});
  }
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
}

void write_chrome_trace(const Timeline& timeline, const std::string& path, std::span<const std::string> process_names) {
  write_text_file(path, chrome_trace(timeline, process_names).dump() + "\n");
}

}  // namespace fulcrum
