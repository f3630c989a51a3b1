#include "fulcrum/plan/serialize.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/core/random.hpp"
#include "fulcrum/plan/program_verify.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>

#include <unistd.h>

namespace fulcrum {
namespace {

using nlohmann::json;

// Values are random and mostly meaningless: serialisation checks the encoding, not the plan, so wide
// and negative numbers are fair game and show that no field is narrowed on the way.
struct PlanMaker {
  Rng rng;
  int docs = 0;
  bool heads = false;  // items and slices with head ranges, documents with per-head masks

  Tokens tokens() { return rng.uniform_int(-3, Tokens{1} << 40); }
  int index() { return static_cast<int>(rng.uniform_int(-1, 1'000'000)); }
  Slice slice() {
    Slice s{index(), tokens(), tokens()};
    if (heads && rng.uniform() < 0.5) s.heads = {index(), index()};
    return s;
  }
  RowSpan span() { return {tokens(), tokens(), tokens()}; }
  std::vector<Slice> slices() {
    std::vector<Slice> out(static_cast<std::size_t>(rng.uniform_int(0, 3)));
    for (auto& s : out) s = slice();
    return out;
  }
  std::vector<Message> messages() {
    std::vector<Message> out(static_cast<std::size_t>(rng.uniform_int(0, 3)));
    for (auto& m : out) m = {index(), index(), slice()};
    return out;
  }
  std::vector<AttentionItem> items() {
    std::vector<AttentionItem> out(static_cast<std::size_t>(rng.uniform_int(1, 3)));
    for (auto& item : out) {
      item.doc = static_cast<int>(rng.uniform_int(0, docs - 1));
      item.queries[0] = span();
      // Half the items have a head+tail pair; the rest keep the all-zero second span JSON leaves out.
      if (rng.uniform() < 0.5) item.queries[1] = span();
      item.keys = span();
      if (heads && rng.uniform() < 0.7) item.heads = {index(), index()};
    }
    return out;
  }

  /// Instruction kinds cycle with `i`, so every program with >= 7 instructions has all of them.
  Instruction instruction(int i) {
    Instruction in;
    in.stream = static_cast<int>(rng.uniform_int(0, 1));
    switch (i % 7) {
      case 0:
        in.op =
            CommLaunch{index(), messages(), messages(), rng.uniform() < 0.5 ? CommKind::kDispatch : CommKind::kReturn};
        break;
      case 1: in.op = CommWait{index()}; break;
      case 2: in.op = Attention{index(), index(), index(), index(), index(), items()}; break;
      case 3: {
        AttentionBackward b{index(), index(), index(), index(), index(), index(), index(), index(), index(), items()};
        in.op = b;
        break;
      }
      case 4: in.op = Reduce{ReduceOp::kMerge, slice(), slice(), slices(), slices()}; break;
      case 5: in.op = Reduce{ReduceOp::kSum, slice(), slice(), slices(), {}}; break;
      default: in.op = Copy{slice(), slice()}; break;
    }
    return in;
  }

  Plan plan(int ranks, int instructions) {
    Plan p;
    p.pass = rng.uniform() < 0.5 ? Pass::kForward : Pass::kBackward;
    p.planner = "distca \"quoted\" \xc3\xa9";  // quotes and UTF-8 survive both encodings
    p.mode = static_cast<CommMode>(rng.uniform_int(0, 2));
    p.nano_batches = static_cast<int>(rng.uniform_int(1, 64));
    p.heads = {static_cast<int>(rng.uniform_int(1, 64)), 8, 128, 2};
    const std::vector<MaskSpec> masks = {
        MaskSpec::causal(),
        MaskSpec::full(),
        MaskSpec::sliding_window(128),
        MaskSpec::lambda(4, 64),
        MaskSpec::causal_blockwise(64, 2),
        MaskSpec::shared_question(3, 20),
        MaskSpec::parse("vslash:0,64:0,128"),
        MaskSpec::parse("vslash::1"),
        MaskSpec::block_sparse(64, {{0, 0}, {1, 0}, {1, 1}, {3, 2}}),
        MaskSpec::vertical_slash_blocks(64, {0, 17}, {0, 1, 5}),
        MaskSpec::parse("striped:4:64:vsblocks:64:0,17:0,1,5"),
    };
    for (const auto& mask : masks) p.documents.push_back({rng.uniform_int(1, 100'000), mask});
    if (heads) {
      for (auto& doc : p.documents) {
        if (rng.uniform() < 0.5) continue;
        for (int h = static_cast<int>(rng.uniform_int(1, 9)); h > 0; --h) {
          doc.head_masks.push_back(masks[static_cast<std::size_t>(rng.uniform_int(0, std::ssize(masks) - 1))]);
        }
      }
    }
    docs = static_cast<int>(p.documents.size());
    for (int r = 0; r < ranks; ++r) {
      Program program;
      program.rank = r;
      for (int i = 0; i < 3; ++i) program.owned.push_back({i, {tokens(), tokens()}, tokens()});
      // 9 fields x 4 inits: every field and every init appears in every program.
      for (int b = 0; b < 12; ++b) {
        program.buffers.push_back({"buf" + std::to_string(b), static_cast<Field>(b % 9), tokens(),
                                   static_cast<BufferInit>(b % 4), rng.uniform() < 0.5});
      }
      for (int i = 0; i < instructions; ++i) program.instructions.push_back(instruction(i));
      p.programs.push_back(std::move(program));
    }
    return p;
  }
};

Plan random_plan(std::uint64_t seed, int ranks = 3, int instructions = 21, bool heads = false) {
  return PlanMaker{Rng(seed), 0, heads}.plan(ranks, instructions);
}

/// Runs `f`, expecting a fulcrum::Error whose message contains every one of `parts`.
template <class F>
void expect_error(F&& f, std::initializer_list<std::string_view> parts) {
  try {
    f();
    ADD_FAILURE() << "no Error thrown; expected one mentioning " << *parts.begin();
  } catch (const Error& e) {
    for (auto part : parts) EXPECT_NE(std::string_view(e.what()).find(part), std::string_view::npos) << e.what();
  }
}

TEST(Serialize, JsonRoundTripsRandomPlans) {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    const Plan plan = random_plan(seed);
    const json j = to_json(plan);
    EXPECT_EQ(j.at("format"), "fulcrum-plan");
    EXPECT_EQ(j.at("version"), 3);
    EXPECT_EQ(plan_from_json(j), plan) << "seed " << seed;
    EXPECT_EQ(plan_from_json(json::parse(j.dump())), plan) << "seed " << seed << " through text";
  }
}

// Head ranges of items and slices and per-head masks round-trip in both encodings; JSON writes them only
// where a plan has them (a slice over every head stays [buffer, row, rows]).
TEST(Serialize, HeadRangesAndPerHeadMasksRoundTrip) {
  bool sliced = false;
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    const Plan plan = random_plan(seed, 3, 21, true);
    const json j = to_json(plan);
    EXPECT_EQ(j.at("version"), 3);
    EXPECT_EQ(plan_from_json(j), plan) << "seed " << seed;
    EXPECT_EQ(plan_from_json(json::parse(j.dump())), plan) << "seed " << seed;
    const auto bytes = to_binary(plan);
    EXPECT_EQ(bytes[4], 3);
    EXPECT_EQ(plan_from_binary(bytes), plan) << "seed " << seed;
    for (const auto& in : j.at("programs").at(0).at("instructions")) {
      if (in.contains("src")) sliced = sliced || in.at("src").size() == 5 || in.at("dst").size() == 5;
    }
  }
  EXPECT_TRUE(sliced) << "some copy must have a head-sliced slice";
  Plan plan = random_plan(3);
  const std::string text = to_json(plan).dump();
  EXPECT_EQ(text.find("head_masks"), std::string::npos);
  EXPECT_EQ(text.find("\"heads\":["), std::string::npos);
  plan.documents[0].head_masks = {MaskSpec::causal()};
  EXPECT_NE(to_json(plan).dump().find("head_masks"), std::string::npos);
  EXPECT_EQ(plan_from_binary(to_binary(plan)), plan);
  // A slice over heads [4, 8): five numbers in JSON, the same Slice back from both encodings.
  auto& copy = std::get<Copy>(plan.programs[0].instructions[6].op);
  copy.src.heads = {4, 8};
  const json j = to_json(plan);
  EXPECT_EQ(j.at("programs").at(0).at("instructions").at(6).at("src"),
            json::array({copy.src.buffer, copy.src.row, copy.src.rows, 4, 8}));
  EXPECT_EQ(plan_from_json(j), plan);
  EXPECT_EQ(plan_from_binary(to_binary(plan)), plan);
}

TEST(Serialize, JsonIsReadable) {
  const json j = to_json(random_plan(7));
  const json& instructions = j.at("programs").at(0).at("instructions");
  EXPECT_EQ(instructions.at(0).at("op"), "launch");
  EXPECT_EQ(instructions.at(4).at("op"), "merge");
  EXPECT_EQ(instructions.at(5).at("op"), "sum");
  EXPECT_EQ(instructions.at(6).at("op"), "copy");
  EXPECT_TRUE(instructions.at(6).at("src").is_array());
  EXPECT_EQ(j.at("documents").at(6).at("mask"), "vslash:0,64:0,128");
  EXPECT_EQ(j.at("programs").at(0).at("buffers").at(2).at("init"), "-inf");
}

TEST(Serialize, BinaryRoundTripsRandomPlans) {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    const Plan plan = random_plan(seed);
    const auto bytes = to_binary(plan);
    ASSERT_GE(bytes.size(), 8U);
    EXPECT_EQ(std::string(bytes.begin(), bytes.begin() + 4), "FCPL");
    EXPECT_EQ(plan_from_binary(bytes), plan) << "seed " << seed;
    EXPECT_EQ(to_binary(plan_from_binary(bytes)), bytes) << "seed " << seed;
  }
  EXPECT_EQ(plan_from_binary(to_binary(Plan{})), Plan{});
  EXPECT_EQ(plan_from_json(to_json(Plan{})), Plan{});
}

TEST(Serialize, BinaryIsSmallerThanJsonForManyInstructions) {
  const Plan plan = random_plan(3, 8, 700);
  const auto binary = to_binary(plan);
  const auto text = to_json(plan).dump();
  EXPECT_LT(binary.size(), text.size());
  EXPECT_EQ(plan_from_binary(binary), plan);
}

TEST(Serialize, EveryTruncatedBinaryThrows) {
  const auto bytes = to_binary(random_plan(5, 1, 7));
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    // Truncation inside the program is the interesting case; a count cut short is also "truncated".
    expect_error([&] { plan_from_binary(std::span(bytes.data(), n)); }, {"plan binary: truncated at byte"});
  }
  // The message names the field being read; the last one is the final copy's dst heads.
  expect_error([&] { plan_from_binary(std::span(bytes.data(), bytes.size() - 1)); },
               {"while reading plan.programs[0].instructions[6].dst.heads end (4 bytes, 3 bytes left)"});
  auto longer = bytes;
  longer.push_back(0);
  expect_error([&] { plan_from_binary(longer); }, {"1 trailing bytes"});
}

TEST(Serialize, CorruptBinaryHeaderThrows) {
  const auto bytes = to_binary(random_plan(9, 1, 7));
  auto bad = bytes;
  bad[1] = 'X';
  expect_error([&] { plan_from_binary(bad); }, {"bad magic 'FXPL'"});
  bad = bytes;
  bad[4] = 2;
  expect_error([&] { plan_from_binary(bad); }, {"version = 2", "reads version 3"});
  bad = bytes;
  bad[8] = 2;  // the pass, right after magic and version
  expect_error([&] { plan_from_binary(bad); }, {"plan.pass = 2", "must be in [0, 1]"});
}

/// The first byte where two encodings differ: locates a field in the binary without hard-coding offsets.
std::size_t first_difference(const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b) {
  std::size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  return i;
}

TEST(Serialize, OutOfRangeBinaryValuesThrowNamingTheField) {
  Plan plan = random_plan(11, 2, 7);
  struct Case {
    std::function<void(Plan&)> change;
    std::uint8_t bad;
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](Plan& p) { p.programs[1].buffers[3].field = Field::kDV; }, 9, "plan.programs[1].buffers[3].field = 9"},
      {[](Plan& p) { p.programs[1].buffers[3].init = BufferInit::kNegInf; }, 4, "plan.programs[1].buffers[3].init = 4"},
      {[](Plan& p) { p.programs[1].buffers[3].output = !p.programs[1].buffers[3].output; }, 2, "buffers[3].output = 2"},
      {[](Plan& p) { p.programs[1].instructions[4].op = Copy{}; }, 6, "plan.programs[1].instructions[4].op = 6"},
      {[](Plan& p) { std::get<Reduce>(p.programs[0].instructions[4].op).op = ReduceOp::kSum; }, 2,
       "instructions[4].reduce op = 2"},
  };
  const auto bytes = to_binary(plan);
  for (const auto& c : cases) {
    Plan changed = plan;
    c.change(changed);
    const std::size_t at = first_difference(bytes, to_binary(changed));
    ASSERT_LT(at, bytes.size()) << c.message;
    auto bad = bytes;
    bad[at] = c.bad;
    expect_error([&] { plan_from_binary(bad); }, {c.message});
  }
  // A corrupt mask text names the document.
  Plan masked = plan;
  masked.documents[2].mask = MaskSpec::sliding_window(129);  // same length as "window:128"
  const auto masked_bytes = to_binary(masked);
  auto bad = masked_bytes;
  bad[first_difference(bytes, masked_bytes)] = 'x';  // "window:129" -> "window:12x"
  expect_error([&] { plan_from_binary(bad); }, {"plan.documents[2].mask = 'window:12x'"});
}

TEST(Serialize, EveryCorruptedByteThrowsOrDecodes) {
  // A fuzz sweep (meant for the ASan/UBSan build; fuzz/plan_binary_fuzz goes further): any byte value
  // anywhere gives a bad-input Error or some plan, which verify_plan reports on without throwing; never a
  // crash, a hang or a huge allocation.
  const auto bytes = to_binary(random_plan(13, 1, 7));
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    for (std::uint8_t value : {std::uint8_t{0}, std::uint8_t{1}, std::uint8_t{0x7f}, std::uint8_t{0xff}}) {
      auto bad = bytes;
      bad[i] = value;
      try {
        const Plan plan = plan_from_binary(bad);
        EXPECT_FALSE(verify_plan(plan).ok());  // a random plan is wrong, and says so
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kBadInput) << e.what();
      }
    }
  }
}

// Names reach Python as str and JSON as strings: bytes that are not UTF-8 are refused where they are read
// (they surfaced as a UnicodeDecodeError, or a JSON type error, far from the file).
TEST(Serialize, StringsThatAreNotUtf8AreRefused) {
  Plan plan = random_plan(5, 1, 2);
  plan.planner = "dcp";
  auto bytes = to_binary(plan);
  const std::string_view view(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  const std::size_t at = view.find("dcp");
  ASSERT_NE(at, std::string_view::npos);
  for (std::uint8_t bad : {std::uint8_t{0xff}, std::uint8_t{0xc0}, std::uint8_t{0x80}, std::uint8_t{0xed}}) {
    auto corrupt = bytes;
    corrupt[at + 1] = bad;
    expect_error([&] { plan_from_binary(corrupt); }, {"plan.planner at byte", "not UTF-8"});
  }
  plan.planner = "d\xc3\xa9p \xf0\x9f\x98\x80";  // two- and four-byte sequences are fine
  EXPECT_EQ(plan_from_binary(to_binary(plan)), plan);
}

TEST(Serialize, MalformedJsonThrowsNamingTheField) {
  const json good = to_json(random_plan(17));
  struct Case {
    std::function<void(json&)> change;
    std::vector<std::string_view> message;
  };
  const std::vector<Case> cases = {
      {[](json& j) { j["programs"][2]["instructions"][5]["op"] = "foo"; },
       {"plan.programs[2].instructions[5].op = 'foo': must be one of launch, wait, attention, "
        "attention-backward, merge, sum, copy"}},
      {[](json& j) { j["programs"][0]["buffers"][1].erase("rows"); }, {"plan.programs[0].buffers[1].rows: missing"}},
      {[](json& j) { j["programs"][0]["buffers"][1]["rows"] = "ten"; },
       {"plan.programs[0].buffers[1].rows = \"ten\": must be an integer"}},
      {[](json& j) { j["programs"][0]["buffers"][1]["field"] = "x"; },
       {"plan.programs[0].buffers[1].field", "'x'", "must be one of q, k, v"}},
      {[](json& j) { j["programs"][0]["buffers"][1]["init"] = "ones"; }, {"buffers[1].init", "'ones'"}},
      {[](json& j) { j["programs"][0]["buffers"][1]["output"] = 1; }, {"buffers[1].output = 1: must be true or false"}},
      {[](json& j) {
         j["programs"][1]["instructions"][6]["src"] = {1, 2};
       },
       {"plan.programs[1].instructions[6].src = [1,2]: must be [buffer, row, rows]"}},
      {[](json& j) { j["programs"][1]["instructions"][1]["stream"] = 1.5; },
       {"plan.programs[1].instructions[1].stream = 1.5: must be an integer"}},
      {[](json& j) { j["programs"][1]["instructions"][1]["launch"] = 1LL << 40; },
       {"instructions[1].launch = 1099511627776: must be in [-2147483648, 2147483647]"}},
      {[](json& j) { j["programs"][1]["instructions"][2]["items"][0]["queries"] = json::array(); },
       {"instructions[2].items[0].queries = []: must be [span] or [span, span]"}},
      {[](json& j) { j["programs"][0]["owned"][0]["tokens"] = {1}; }, {"plan.programs[0].owned[0].tokens = [1]"}},
      {[](json& j) { j["documents"][6]["mask"] = "vslash:0,x:1"; }, {"plan.documents[6].mask = 'vslash:0,x:1'"}},
      {[](json& j) { j["pass"] = "sideways"; }, {"plan.pass", "'sideways'"}},
      {[](json& j) { j["heads"] = 4; }, {"plan.heads = 4: must be an object"}},
      {[](json& j) { j["programs"] = json::object(); }, {"plan.programs = {}: must be an array"}},
      {[](json& j) { j["version"] = 2; }, {"plan.version = 2: this build reads version 3"}},
      {[](json& j) {
         j["programs"][1]["instructions"][6]["dst"] = {1, 2, 3, 4};
       },
       {"instructions[6].dst = [1,2,3,4]: must be [buffer, row, rows] or [buffer, row, rows, head begin, head end]"}},
      {[](json& j) { j["mode"] = "ring"; }, {"plan.mode = 'ring'"}},
      {[](json& j) { j["programs"][1]["instructions"][2]["items"][0]["heads"] = {1}; },
       {"instructions[2].items[0].heads = [1]: must be [begin, end]"}},
      {[](json& j) {
         j["documents"][2]["head_masks"] = {"causal", "nope"};
       },
       {"plan.documents[2].head_masks[1] = 'nope'"}},
      {[](json& j) { j["format"] = "other"; }, {"plan.format = 'other': must be 'fulcrum-plan'"}},
      {[](json& j) { j = json::array(); }, {"plan = []: must be an object"}},
  };
  for (const auto& c : cases) {
    json bad = good;
    c.change(bad);
    try {
      (void)plan_from_json(bad);
      ADD_FAILURE() << "no Error; expected " << c.message.front();
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kBadInput);
      for (auto part : c.message) EXPECT_NE(std::string_view(e.what()).find(part), std::string_view::npos) << e.what();
    }
  }
}

TEST(Serialize, SaveAndLoadChooseTheFormatByExtension) {
  const Plan plan = random_plan(19);
  const auto dir = std::filesystem::temp_directory_path() / ("fulcrum_serialize_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string json_path = (dir / "plan.json").string();
  const std::string binary_path = (dir / "plan.fcpl").string();
  save_plan(plan, json_path);
  save_plan(plan, binary_path);
  EXPECT_EQ(load_plan(json_path), plan);
  EXPECT_EQ(load_plan(binary_path), plan);
  std::ifstream text(json_path);
  EXPECT_EQ(text.get(), '{');
  EXPECT_LT(std::filesystem::file_size(binary_path), std::filesystem::file_size(json_path));

  // Errors name the file: a missing one, a binary read as JSON, JSON read as binary.
  expect_error([&] { load_plan((dir / "missing.fcpl").string()); }, {"missing.fcpl", "cannot be read"});
  std::filesystem::copy_file(binary_path, dir / "binary.json");
  expect_error([&] { load_plan((dir / "binary.json").string()); }, {"binary.json: not JSON: parse error"});
  std::filesystem::copy_file(json_path, dir / "text.bin");
  expect_error([&] { load_plan((dir / "text.bin").string()); }, {"text.bin", "bad magic"});
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace fulcrum
