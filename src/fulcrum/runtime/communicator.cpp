#include "fulcrum/runtime/communicator.hpp"

#include <fmt/format.h>

#include <ctime>

namespace fulcrum::runtime {

double Communicator::now_s() {
  // CLOCK_MONOTONIC rather than std::chrono::steady_clock's unspecified epoch: every process on one
  // machine reads the same clock, so timelines of different ranks line up without a sync step.
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

namespace detail {

std::string timeout_message(int rank, double timeout_s, int handle, std::span<const IncompleteMessage> incomplete,
                            std::size_t total) {
  // A launch can hold hundreds of messages; the first few name the culprit well enough.
  constexpr std::size_t kMaxListed = 8;
  std::string list;
  for (std::size_t i = 0; i < incomplete.size() && i < kMaxListed; ++i) {
    const IncompleteMessage& m = incomplete[i];
    list +=
        fmt::format("{}{} rank {} tag {}", i == 0 ? "" : ", ", m.is_send ? "send to" : "receive from", m.peer, m.tag);
  }
  if (incomplete.size() > kMaxListed) list += fmt::format(", and {} more", incomplete.size() - kMaxListed);
  return fmt::format("rank {}: timed out after {} s waiting for launch {} ({} of {} messages incomplete: {})", rank,
                     timeout_s, handle, incomplete.size(), total, list);
}

}  // namespace detail

}  // namespace fulcrum::runtime
