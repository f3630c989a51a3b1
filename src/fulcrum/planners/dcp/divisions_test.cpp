#include "fulcrum/planners/dcp/divisions.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/core/random.hpp"

#include <gtest/gtest.h>

namespace fulcrum::dcp {
namespace {

struct Case {
  Blocks blocks;
  std::vector<int> device;
};

// Three causal documents cut into blocks of 64 (and `head_blocks` head blocks of the tiny model's 2 kv
// heads), every data and computation block on a random device.
Case random_case(std::uint64_t seed, int devices, int head_blocks = 1) {
  Rng rng(seed);
  std::vector<Document> docs;
  for (int d = 0; d < 3; ++d) docs.push_back({d, rng.uniform_int(100, 700), MaskSpec::causal()});
  const auto batch = pack_batch(docs, 1, 2100);
  Case c{make_blocks(batch, 64, model_shape_preset("tiny"), head_blocks), {}};
  const auto vertices = c.blocks.compute.size() + c.blocks.data.size();
  for (std::size_t v = 0; v < vertices; ++v) c.device.push_back(static_cast<int>(rng.uniform_int(0, devices - 1)));
  return c;
}

bool needs_traffic(const Case& c, int block) {
  const int compute = static_cast<int>(c.blocks.compute.size());
  const auto& b = c.blocks.compute[block];
  return c.device[compute + b.q_block] != c.device[block] || c.device[compute + b.kv_block] != c.device[block];
}

TEST(DcpDivisions, LocalWorkFirstAndEveryDivisionInRange) {
  const auto model = model_shape_preset("tiny");
  for (std::uint64_t seed = 0; seed < 20; ++seed) {
    const auto c = random_case(seed, 4, 1 + static_cast<int>(seed % 2));
    for (int t : {1, 2, 4, 7}) {
      const auto division = assign_divisions(c.blocks, c.device, t, model);
      ASSERT_EQ(division.size(), c.blocks.compute.size());
      for (std::size_t i = 0; i < division.size(); ++i) {
        ASSERT_GE(division[i], 0);
        ASSERT_LT(division[i], t);
        // Division 0 holds exactly the blocks that need no traffic (when there is more than one).
        if (t > 1) {
          EXPECT_EQ(division[i] == 0, !needs_traffic(c, static_cast<int>(i))) << "seed " << seed;
        }
      }
    }
  }
  EXPECT_THROW(assign_divisions(random_case(0, 2).blocks, random_case(0, 2).device, 0, model), Error);
}

TEST(DcpDivisions, TrafficIsSpreadOverTheDivisionsAfterTheFirst) {
  const auto model = model_shape_preset("tiny");
  for (std::uint64_t seed = 0; seed < 10; ++seed) {
    const auto c = random_case(seed, 4, 1 + static_cast<int>(seed % 2));
    const int t = 4;
    const auto division = assign_divisions(c.blocks, c.device, t, model);
    const auto once = division_traffic_bytes(c.blocks, c.device, std::vector<int>(division.size(), 0), model);
    const auto per = division_traffic_bytes(c.blocks, c.device, division, model);
    ASSERT_EQ(per.size(), static_cast<std::size_t>(t));
    EXPECT_EQ(per[0], 0.0) << "seed " << seed << ": division 0 needs traffic";
    double total = 0;
    for (int d = 1; d < t; ++d) {
      EXPECT_GT(per[d], 0.0) << "seed " << seed << " division " << d;
      // A middle division stays within its share of what was left (plus the block that found it full
      // was not taken, so no slack is needed).
      if (d < t - 1) {
        EXPECT_LE(per[d], once[0] / (t - d) + 1e-6) << "seed " << seed;
      }
      total += per[d];
    }
    EXPECT_GE(total, once[0] - 1e-6);
    EXPECT_LE(total, (t - 1) * once[0] + 1e-6);  // each division fetches a datum at most once per device
  }
}

// With head blocks a division fetches each head block's share of a datum once: with every tile on a
// device that holds none of the data, the two head blocks together fetch what whole tiles fetch, and
// one head block alone half of it.
TEST(DcpDivisions, EachHeadBlockFetchesItsShareOfTheBytes) {
  const auto model = model_shape_preset("tiny");
  for (std::uint64_t seed = 0; seed < 5; ++seed) {
    auto whole = random_case(seed, 2);
    auto split = random_case(seed, 2, 2);
    // Every tile on device 0, every data block on device 1.
    for (Case* c : {&whole, &split}) {
      for (std::size_t v = 0; v < c->device.size(); ++v) c->device[v] = v < c->blocks.compute.size() ? 0 : 1;
    }
    const std::size_t tiles = whole.blocks.compute.size();
    const auto once = division_traffic_bytes(whole.blocks, whole.device, std::vector<int>(tiles, 0), model);
    const auto halves = division_traffic_bytes(split.blocks, split.device, std::vector<int>(2 * tiles, 0), model);
    EXPECT_NEAR(halves[0], once[0], 1e-9 * once[0]) << "seed " << seed;
    // Head block h in division h: half the bytes each.
    std::vector<int> division(2 * tiles, 1);
    for (std::size_t c = 0; c < split.blocks.compute.size(); ++c) division[c] = split.blocks.compute[c].head_block;
    const auto per = division_traffic_bytes(split.blocks, split.device, division, model);
    EXPECT_NEAR(per[0], once[0] / 2, 1e-9 * once[0]) << "seed " << seed;
    EXPECT_NEAR(per[1], once[0] / 2, 1e-9 * once[0]) << "seed " << seed;
  }
}

}  // namespace
}  // namespace fulcrum::dcp
