#include "fulcrum/prefill/all_reduce.hpp"

#include <vector>

namespace fulcrum::prefill {

void all_reduce_sum(runtime::Communicator& comm, std::span<float> data, int tag_base) {
  const int n = comm.size();
  if (n == 1) return;
  const int rank = comm.rank();
  const int next = (rank + 1) % n;
  const int previous = (rank + n - 1) % n;
  auto chunk = [&](int c) {
    const int i = ((c % n) + n) % n;
    const std::size_t begin = data.size() * static_cast<std::size_t>(i) / static_cast<std::size_t>(n);
    const std::size_t end = data.size() * static_cast<std::size_t>(i + 1) / static_cast<std::size_t>(n);
    return data.subspan(begin, end - begin);
  };
  std::vector<float> incoming(data.size() / static_cast<std::size_t>(n) + 1);
  auto exchange = [&](std::span<float> send, std::span<float> receive, int tag) {
    const runtime::WireMessage out{next, tag, send.data(), send.size_bytes()};
    const runtime::WireMessage in{previous, tag, receive.data(), receive.size_bytes()};
    comm.wait(comm.launch({&out, 1}, {&in, 1}));
  };
  // Reduce-scatter: at step s rank r passes on its running sum of chunk r - s; after n - 1 steps it holds
  // the full sum of chunk r + 1.
  for (int s = 0; s < n - 1; ++s) {
    const auto send = chunk(rank - s);
    const auto mine = chunk(rank - s - 1);
    const std::span<float> receive(incoming.data(), mine.size());
    exchange(send, receive, tag_base + s);
    for (std::size_t i = 0; i < mine.size(); ++i) mine[i] += receive[i];
  }
  // All-gather: pass the finished chunks round the ring.
  for (int s = 0; s < n - 1; ++s) exchange(chunk(rank + 1 - s), chunk(rank - s), tag_base + n + s);
}

}  // namespace fulcrum::prefill
