// How a plan's traffic meets its compute: the one communication-mode type. Users choose the mode
// (`--modes`, `--baseline-mode`, Python's `mode=`); compile stores it in the Plan together with the number
// of ordered nano-batches it produced, and the executor, the simulator and the reports read it from there.
#pragma once

#include <cstdint>
#include <string_view>

namespace fulcrum {

/// - single-stream: dispatch, wait, compute everything, return. No overlap (1 nano-batch).
/// - pingpong: ordered nano-batches whose traffic overlaps the previous one's compute: two halves of
///   each server's work, or the planner's divisions (DCP) when it sets them (N nano-batches).
/// - signal: the pingpong plan with 1-byte messages, what compute alone would give if traffic were
///   free (DistCA's ablation; its results are not meaningful).
enum class CommMode : std::uint8_t { kSingleStream, kPingPong, kSignal };

const char* to_string(CommMode mode);
/// "single-stream" | "pingpong" | "signal"; fails naming `field` otherwise.
CommMode parse_comm_mode(std::string_view text, std::string_view field = "mode");
/// Whether the mode's plan overlaps traffic with compute in ordered nano-batches.
inline bool overlaps(CommMode mode) { return mode != CommMode::kSingleStream; }
/// Whether messages carry their data (every mode but signal).
inline bool moves_data(CommMode mode) { return mode != CommMode::kSignal; }

}  // namespace fulcrum
