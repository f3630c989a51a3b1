#include "fulcrum/planners/dcp/divisions.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/cost/attention_cost.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

namespace fulcrum::dcp {
namespace {

// What a device has fetched for one division: (data block, head block, 0 = Q/O or 1 = K/V).
using Fetched = std::set<std::tuple<int, int, int>>;

// Bytes block c adds when run on `device[c]` in a division that has fetched `fetched` (null: nothing);
// with `record`, marks them fetched. `bytes` are one head block's (head_block_token_bytes).
double fetch_bytes(const Blocks& blocks, std::span<const int> device, int c, const TokenBytes& bytes, Fetched* fetched,
                   bool record) {
  const int compute = static_cast<int>(blocks.compute.size());
  const int server = device[c];
  const int h = blocks.compute[c].head_block;
  double total = 0;
  const std::pair<int, double> needs[] = {{blocks.compute[c].q_block, bytes.q + bytes.output()},
                                          {blocks.compute[c].kv_block, bytes.kv}};
  for (int kind = 0; kind < 2; ++kind) {
    const int b = needs[kind].first;
    if (device[compute + b] == server) continue;
    if (fetched && fetched->contains({b, h, kind})) continue;
    if (fetched && record) fetched->insert({b, h, kind});
    total += needs[kind].second * static_cast<double>(blocks.data[b].tokens.size());
  }
  return total;
}

}  // namespace

std::vector<int> assign_divisions(const Blocks& blocks, std::span<const int> device, int divisions,
                                  const ModelShape& model) {
  FULCRUM_CHECK(divisions >= 1, "{} divisions (the dcp-divisions option checks its range)", divisions);
  const int compute = static_cast<int>(blocks.compute.size());
  const auto bytes = head_block_token_bytes(model, blocks.head_blocks);
  int devices = 0;
  for (int d : device) devices = std::max(devices, d + 1);
  std::vector<int> division(static_cast<std::size_t>(compute), divisions - 1);
  // Each device's blocks that need traffic, in (q block, head block, kv block) order so neighbours share
  // data.
  std::vector<std::vector<int>> pending(static_cast<std::size_t>(devices));
  std::vector<Fetched> all(static_cast<std::size_t>(devices));
  double remaining = 0;  // the traffic left, each datum counted once per device
  for (int c = 0; c < compute; ++c) {
    if (fetch_bytes(blocks, device, c, bytes, nullptr, false) == 0) {
      division[c] = 0;
    } else {
      pending[device[c]].push_back(c);
      remaining += fetch_bytes(blocks, device, c, bytes, &all[device[c]], true);
    }
  }
  if (divisions <= 2) return division;  // local work first, the rest in the last
  for (int d = 1; d + 1 < divisions; ++d) {
    const double budget = remaining / (divisions - d);
    double spent = 0;
    std::vector<double> load(static_cast<std::size_t>(devices), 0.0);
    std::vector<char> open(static_cast<std::size_t>(devices), 1);
    std::vector<Fetched> fetched(static_cast<std::size_t>(devices));
    while (true) {
      int r = -1;  // the open device with the least compute in this division
      for (int x = 0; x < devices; ++x) {
        if (open[x] && !pending[x].empty() && (r < 0 || load[x] < load[r])) r = x;
      }
      if (r < 0) break;
      // Its block that adds the fewest bytes to what the division already fetches (data it shares with
      // blocks taken before comes free), the first in block order among equals.
      std::size_t pick = 0;
      double b = fetch_bytes(blocks, device, pending[r][0], bytes, &fetched[r], false);
      for (std::size_t i = 1; i < pending[r].size() && b > 0; ++i) {
        const double bi = fetch_bytes(blocks, device, pending[r][i], bytes, &fetched[r], false);
        if (bi < b) {
          b = bi;
          pick = i;
        }
      }
      if (spent + b > budget) {
        open[r] = 0;  // even its cheapest block would overrun the division's budget: the device stops
        continue;
      }
      const int c = pending[r][pick];
      pending[r].erase(pending[r].begin() + static_cast<std::ptrdiff_t>(pick));
      fetch_bytes(blocks, device, c, bytes, &fetched[r], true);
      spent += b;
      load[r] += blocks.compute[c].flops;
      division[c] = d;
    }
    remaining = std::max(0.0, remaining - spent);
  }
  return division;
}

std::vector<double> division_traffic_bytes(const Blocks& blocks, std::span<const int> device,
                                           std::span<const int> division, const ModelShape& model) {
  const auto bytes = head_block_token_bytes(model, blocks.head_blocks);
  std::map<std::pair<int, int>, Fetched> fetched;  // (device, division)
  std::vector<double> total;
  for (int c = 0; c < static_cast<int>(blocks.compute.size()); ++c) {
    if (division[c] >= static_cast<int>(total.size())) total.resize(static_cast<std::size_t>(division[c]) + 1, 0.0);
    total[division[c]] += fetch_bytes(blocks, device, c, bytes, &fetched[{device[c], division[c]}], true);
  }
  return total;
}

}  // namespace fulcrum::dcp
