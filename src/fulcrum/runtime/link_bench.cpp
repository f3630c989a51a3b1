#include "fulcrum/runtime/link_bench.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/core/statistics.hpp"

#include <algorithm>
#include <cstring>

namespace fulcrum::runtime {
namespace {}  // namespace

LinkMeasurement measure_link(Communicator& comm, const std::vector<std::size_t>& sizes, int repeats) {
  if (comm.size() < 2) fail("ranks = {}: the link benchmark needs at least 2", comm.size());
  if (sizes.empty() || repeats < 1) fail("sizes and repeats: need at least one size and one repeat");
  LinkMeasurement out;
  const std::size_t largest = *std::max_element(sizes.begin(), sizes.end());
  std::vector<char> send(largest, 1), receive(largest, 0);
  const int me = comm.rank(), peer = 1 - me;
  for (std::size_t bytes : sizes) {
    std::vector<double> one_way;
    for (int rep = 0; rep < repeats + 1; ++rep) {  // the first round warms up the path
      comm.barrier();
      const double start = Communicator::now_s();
      if (me == 0) {
        const WireMessage m{peer, rep, send.data(), bytes};
        comm.wait(comm.launch({&m, 1}, {}));
        const WireMessage back{peer, rep, receive.data(), bytes};
        comm.wait(comm.launch({}, {&back, 1}));
      } else if (me == 1) {
        const WireMessage in{peer, rep, receive.data(), bytes};
        comm.wait(comm.launch({}, {&in, 1}));
        const WireMessage back{peer, rep, send.data(), bytes};
        comm.wait(comm.launch({&back, 1}, {}));
      }
      if (rep > 0) one_way.push_back((Communicator::now_s() - start) / 2);
    }
    out.samples.push_back({bytes, median(one_way)});
  }
  // Rank 0's view is the measurement; every rank returns the same numbers.
  std::vector<double> mine;
  for (const auto& s : out.samples) mine.push_back(s.one_way_s);
  const auto all = comm.all_gather(mine);
  for (std::size_t i = 0; i < out.samples.size(); ++i) out.samples[i].one_way_s = all[i];
  const auto smallest = std::min_element(out.samples.begin(), out.samples.end(),
                                         [](const LinkSample& a, const LinkSample& b) { return a.bytes < b.bytes; });
  const auto biggest = std::max_element(out.samples.begin(), out.samples.end(),
                                        [](const LinkSample& a, const LinkSample& b) { return a.bytes < b.bytes; });
  out.latency_s = smallest->one_way_s;
  out.bandwidth_bytes_per_s = static_cast<double>(biggest->bytes) / std::max(1e-12, biggest->one_way_s - out.latency_s);
  std::vector<double> copies;
  for (int rep = 0; rep < repeats; ++rep) {
    const double start = Communicator::now_s();
    std::memcpy(receive.data(), send.data(), largest);
    copies.push_back(Communicator::now_s() - start);
  }
  out.memcpy_bytes_per_s = 2.0 * static_cast<double>(largest) / median(copies);
  return out;
}

}  // namespace fulcrum::runtime
