// Message patterns shared by the Local and MPI communicator tests (tests only): a plan of messages that
// every rank derives from the same seed, and one rank's side of running it with the data checked.
#pragma once

#include "fulcrum/core/random.hpp"
#include "fulcrum/runtime/communicator.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace fulcrum::runtime::testing {

struct PlannedMessage {
  int src = 0;
  int dst = 0;
  int tag = 0;
  std::size_t bytes = 0;
};

/// Every ordered pair of ranks (self included) gets 0..max_per_pair messages with distinct random tags
/// in [0, max_tag] and random sizes in [0, max_bytes].
inline std::vector<PlannedMessage> random_exchange(int ranks, std::uint64_t seed, int max_per_pair,
                                                   std::size_t max_bytes, int max_tag) {
  Rng rng(seed);
  std::vector<PlannedMessage> plan;
  for (int src = 0; src < ranks; ++src) {
    for (int dst = 0; dst < ranks; ++dst) {
      std::set<int> tags;
      const auto count = rng.uniform_int(0, max_per_pair);
      while (static_cast<std::int64_t>(tags.size()) < count) tags.insert(static_cast<int>(rng.uniform_int(0, max_tag)));
      for (int tag : tags) {
        plan.push_back(
            {src, dst, tag, static_cast<std::size_t>(rng.uniform_int(0, static_cast<std::int64_t>(max_bytes)))});
      }
    }
  }
  return plan;
}

/// Rank r sends `bytes` to r + 1 (mod ranks), tag r.
inline std::vector<PlannedMessage> ring_exchange(int ranks, std::size_t bytes) {
  std::vector<PlannedMessage> plan;
  for (int r = 0; r < ranks; ++r) plan.push_back({r, (r + 1) % ranks, r, bytes});
  return plan;
}

/// Every rank sends `bytes` to every other rank, tag src * ranks + dst.
inline std::vector<PlannedMessage> all_to_all_exchange(int ranks, std::size_t bytes) {
  std::vector<PlannedMessage> plan;
  for (int src = 0; src < ranks; ++src) {
    for (int dst = 0; dst < ranks; ++dst) {
      if (src != dst) plan.push_back({src, dst, src * ranks + dst, bytes});
    }
  }
  return plan;
}

/// Byte i of message m, computable by the receiver alone.
inline std::uint8_t pattern_byte(const PlannedMessage& m, std::size_t i) {
  return static_cast<std::uint8_t>((static_cast<std::size_t>(m.src) * 131 + static_cast<std::size_t>(m.dst) * 31 +
                                    static_cast<std::size_t>(m.tag) * 7 + i * 13 + (i >> 8)) &
                                   0xFF);
}

struct ExchangeResult {
  std::size_t wrong_bytes = 0;
  std::string first_problem;  // empty when every byte arrived right
  std::vector<LaunchTimes> times;
};

/// This rank's side of `plan`: its messages spread over `launches` launches in a seeded random order,
/// all launched before any is waited for (in another random order), then every received byte checked.
inline ExchangeResult run_exchange(Communicator& comm, const std::vector<PlannedMessage>& plan, int launches,
                                   std::uint64_t seed) {
  Rng rng(seed * 977 + static_cast<std::uint64_t>(comm.rank()));
  std::vector<std::vector<std::uint8_t>> buffers;
  std::vector<const PlannedMessage*> received;
  std::vector<std::vector<WireMessage>> sends(static_cast<std::size_t>(launches));
  std::vector<std::vector<WireMessage>> receives(static_cast<std::size_t>(launches));
  buffers.reserve(plan.size() * 2);
  for (const PlannedMessage& m : plan) {
    const auto pick = static_cast<std::size_t>(rng.uniform_int(0, launches - 1));
    if (m.src == comm.rank()) {
      auto& buffer = buffers.emplace_back(m.bytes);
      for (std::size_t i = 0; i < m.bytes; ++i) buffer[i] = pattern_byte(m, i);
      sends[pick].push_back({m.dst, m.tag, buffer.data(), m.bytes});
    }
    if (m.dst == comm.rank()) {
      auto& buffer = buffers.emplace_back(m.bytes, std::uint8_t{0xEE});
      receives[pick].push_back({m.src, m.tag, buffer.data(), m.bytes});
      received.push_back(&m);
    }
  }
  std::vector<int> handles;
  for (int l = 0; l < launches; ++l) {
    rng.shuffle(sends[static_cast<std::size_t>(l)]);
    rng.shuffle(receives[static_cast<std::size_t>(l)]);
    handles.push_back(comm.launch(sends[static_cast<std::size_t>(l)], receives[static_cast<std::size_t>(l)]));
  }
  rng.shuffle(handles);
  ExchangeResult result;
  for (int handle : handles) result.times.push_back(comm.wait(handle));

  for (const auto& receive_list : receives) {
    for (const WireMessage& w : receive_list) {
      const PlannedMessage* m = nullptr;
      for (const PlannedMessage* candidate : received) {
        if (candidate->src == w.peer && candidate->tag == w.tag) m = candidate;
      }
      const auto* bytes = static_cast<const std::uint8_t*>(w.data);
      for (std::size_t i = 0; i < w.bytes; ++i) {
        if (bytes[i] == pattern_byte(*m, i)) continue;
        if (result.wrong_bytes++ == 0) {
          result.first_problem =
              fmt::format("rank {}: message from rank {} tag {} ({} bytes): byte {} is {}, expected {}", comm.rank(),
                          m->src, m->tag, m->bytes, i, bytes[i], pattern_byte(*m, i));
        }
      }
    }
  }
  return result;
}

}  // namespace fulcrum::runtime::testing
