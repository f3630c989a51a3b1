// A runtime::Timeline as Chrome trace events (the JSON "traceEvents" format read by Perfetto and
// chrome://tracing), so an executed or simulated plan can be inspected rank by rank.
//
// Layout: one process per rank (pid = rank, named "rank R" unless names are given, sorted by rank);
// inside it tid 0 "compute" and tid 1 + s "comm nano-batch s". Compute has one track whatever the
// nano-batch because a rank computes one thing at a time; communication launches of different
// nano-batches overlap, and a Chrome track must nest, so each stream gets its own. Events are complete
// ("ph": "X") with ts and dur in microseconds since the timeline's earliest event, rounded to the
// nanosecond, and args {bytes, flops, stream}.
#pragma once

#include "fulcrum/runtime/timeline.hpp"

#include <nlohmann/json.hpp>

#include <span>
#include <string>

namespace fulcrum {

/// The trace as JSON. `process_names`, when not empty, names rank r's process process_names[r] and must
/// cover every rank in the timeline. Throws a bad-input Error naming the field for a negative rank or
/// stream, a non-finite time or an event that ends before it starts.
nlohmann::json chrome_trace(const runtime::Timeline& timeline, std::span<const std::string> process_names = {});

/// chrome_trace written to `path` (what `--trace PATH` does); the error names the path if it cannot be
/// written.
void write_chrome_trace(const runtime::Timeline& timeline, const std::string& path,
                        std::span<const std::string> process_names = {});

}  // namespace fulcrum
