#include "fulcrum/workload/length_source.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/core/input_file.hpp"
#include "fulcrum/core/json_reader.hpp"
#include "fulcrum/core/random.hpp"
#include "fulcrum/core/text.hpp"
#include "fulcrum/workload/limits.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

namespace fulcrum {

namespace data {
std::string_view length_tables_json();  // embedded by data/CMakeLists.txt
}

namespace {

constexpr Tokens kLongThreshold = 65536;    // the DistCA evaluation's long-document threshold
constexpr int kLongRepeats = 4;             // long documents are upsampled 4x
constexpr double kShortKeepFraction = 0.5;  // half of the short documents are kept
constexpr double kProlongReplaceProbability = 0.3;
constexpr Tokens kLengthMultiple = 16;
std::string longest_document() { return fmt::format("<= {} (the largest supported document)", kMaxDocumentTokens); }

const nlohmann::json& length_tables() {
  static const nlohmann::json tables = nlohmann::json::parse(data::length_tables_json());
  return tables;
}

// Draws without replacement from a pool, reshuffling when it runs out: the evaluation's "sample
// without replacement" over a finite document set.
class PoolSource : public LengthSource {
 public:
  PoolSource(std::vector<Tokens> pool, std::uint64_t seed) : pool_(std::move(pool)), rng_(seed) {
    FULCRUM_CHECK(!pool_.empty(), "empty length pool");
  }
  Tokens next() override {
    if (cursor_ == 0) rng_.shuffle(pool_);
    const Tokens value = pool_[cursor_];
    cursor_ = (cursor_ + 1) % pool_.size();
    return value;
  }

 protected:
  Rng& rng() { return rng_; }

 private:
  std::vector<Tokens> pool_;
  Rng rng_;
  std::size_t cursor_ = 0;
};

// DistCA's "Pretrain" and "ProLong" batches: half the short documents (rebuilt from the quantile table),
// every long document 4 times, lengths elongated and rounded up to a multiple of 16.
class DatasetSource : public PoolSource {
 public:
  DatasetSource(const nlohmann::json& table, bool prolong, std::uint64_t seed, Tokens tokens_per_rank)
      : PoolSource(build_pool(table), seed),
        prolong_(prolong),
        elongation_(std::max(1.0, static_cast<double>(tokens_per_rank) / static_cast<double>(kLongThreshold))) {
    // Checked here, not at the first long draw: the longest document the elongation can produce.
    Tokens source_longest = 0;
    for (const auto& length : table.at("long_documents"))
      source_longest = std::max(source_longest, length.get<Tokens>());
    const double longest = static_cast<double>(source_longest) * elongation_ + kLengthMultiple;  // rounded up
    if (longest > static_cast<double>(kMaxDocumentTokens)) {
      fail(
          "dataset = '{}' with tokens-per-rank = {}: its documents are elongated up to {:.0f} tokens, more than the "
          "largest supported document ({})",
          prolong ? "prolong" : "pretrain", tokens_per_rank, longest, kMaxDocumentTokens);
    }
  }

  Tokens next() override {
    Tokens length = PoolSource::next();
    if (prolong_ && length >= kLongThreshold && rng().uniform() < kProlongReplaceProbability) {
      length = kLongThreshold;  // replaced by a document of 65,536 x elongation tokens
    }
    const auto elongated = static_cast<Tokens>(std::llround(static_cast<double>(length) * elongation_));
    return round_up(std::max<Tokens>(elongated, 1), kLengthMultiple);
  }

 private:
  static std::vector<Tokens> build_pool(const nlohmann::json& table) {
    const auto quantiles = table.at("short_quantiles").get<std::vector<double>>();
    const auto short_count = table.at("short_documents").get<std::int64_t>();
    const auto keep = static_cast<std::int64_t>(std::llround(kShortKeepFraction * static_cast<double>(short_count)));
    std::vector<Tokens> pool;
    pool.reserve(static_cast<std::size_t>(keep) + kLongRepeats * table.at("long_documents").size());
    // The kept short documents: the quantile function at evenly spaced probabilities.
    const double last = static_cast<double>(quantiles.size() - 1);
    for (std::int64_t i = 0; i < keep; ++i) {
      const double position = (static_cast<double>(i) + 0.5) / static_cast<double>(keep) * last;
      const auto low = static_cast<std::size_t>(position);
      const auto high = std::min(low + 1, quantiles.size() - 1);
      const double value = quantiles[low] + (quantiles[high] - quantiles[low]) * (position - static_cast<double>(low));
      pool.push_back(std::max<Tokens>(1, std::llround(value)));
    }
    for (const auto& length : table.at("long_documents")) {
      for (int r = 0; r < kLongRepeats; ++r) pool.push_back(length.get<Tokens>());
    }
    return pool;
  }

  bool prolong_;
  double elongation_;
};

class UniformSource : public LengthSource {
 public:
  UniformSource(Tokens lo, Tokens hi, std::uint64_t seed) : lo_(lo), hi_(hi), rng_(seed) {}
  Tokens next() override { return rng_.uniform_int(lo_, hi_); }

 private:
  Tokens lo_, hi_;
  Rng rng_;
};

class LognormalSource : public LengthSource {
 public:
  LognormalSource(double mu, double sigma, std::uint64_t seed) : mu_(mu), sigma_(sigma), rng_(seed) {}
  Tokens next() override {
    // The tail is cut at the largest supported document (docs/cli.md), as it is cut at 1 below.
    const double value = std::exp(mu_ + sigma_ * rng_.normal());
    return std::max<Tokens>(1, std::llround(std::min(value, static_cast<double>(kMaxDocumentTokens))));
  }

 private:
  double mu_, sigma_;
  Rng rng_;
};

template <typename T>
T parse_number(std::string_view text, std::string_view spec, std::string_view what) {
  const std::optional<T> value = parse_whole<T>(text);
  if (!value) fail("dataset = '{}': {} '{}' is not a number", spec, what, text);
  return *value;
}

}  // namespace

std::vector<Tokens> parse_lengths(const std::string& text, const std::string& path) {
  std::vector<Tokens> lengths;
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '[') {
    // Errors name the file and the element: "lengths.json: lengths[3] = -4: must be >= 1".
    const JsonDocument json = JsonDocument::parse(text, path, "lengths");
    for (const auto& v : json.root().elements(1, JsonValue::kAnySize, "a non-empty array of lengths")) {
      const auto length = v.integer<Tokens>(1);
      if (length > kMaxDocumentTokens) v.fail_must(longest_document());
      lengths.push_back(length);
    }
  } else {
    std::istringstream lines(text);
    std::string line;
    int number = 0;
    while (std::getline(lines, line)) {
      ++number;
      const auto b = line.find_first_not_of(" \t\r");
      if (b == std::string::npos) continue;
      const auto e = line.find_last_not_of(" \t\r");
      const std::string_view field(line.data() + b, e - b + 1);
      Tokens value = 0;
      auto [ptr, ec] = std::from_chars(field.data(), field.data() + field.size(), value);
      if (ec != std::errc() || ptr != field.data() + field.size()) {
        fail("dataset file '{}' line {}: '{}' is not an integer length", path, number, field);
      }
      lengths.push_back(value);
    }
  }
  if (lengths.empty()) fail("dataset file '{}': holds no lengths", path);
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    if (lengths[i] < 1) fail("dataset file '{}': length #{} = {}: must be >= 1", path, i + 1, lengths[i]);
    if (lengths[i] > kMaxDocumentTokens) {
      fail("dataset file '{}': length #{} = {}: must be {}", path, i + 1, lengths[i], longest_document());
    }
  }
  return lengths;
}

namespace {

std::vector<Tokens> read_lengths_file(const std::string& path) {
  return parse_lengths(read_input_file(path, fmt::format("dataset file '{}'", path)), path);
}

}  // namespace

std::unique_ptr<LengthSource> make_length_source(std::string_view spec, std::uint64_t seed, Tokens tokens_per_rank) {
  if (tokens_per_rank < 1 || tokens_per_rank > kMaxDocumentTokens) {
    fail("tokens-per-rank = {}: must be in [1, {}] (the largest supported document)", tokens_per_rank,
         kMaxDocumentTokens);
  }
  if (spec == "pretrain" || spec == "prolong") {
    return std::make_unique<DatasetSource>(length_tables().at(std::string(spec)), spec == "prolong", seed,
                                           tokens_per_rank);
  }
  const auto parts = split_fields(spec, ':');
  if (parts[0] == "uniform" && parts.size() == 3) {
    const auto lo = parse_number<Tokens>(parts[1], spec, "MIN");
    const auto hi = parse_number<Tokens>(parts[2], spec, "MAX");
    if (lo < 1 || hi < lo || hi > kMaxDocumentTokens) {
      fail("dataset = '{}': need 1 <= MIN <= MAX <= {} (the largest supported document)", spec, kMaxDocumentTokens);
    }
    return std::make_unique<UniformSource>(lo, hi, seed);
  }
  if (parts[0] == "lognormal" && parts.size() == 3) {
    const auto mu = parse_number<double>(parts[1], spec, "MU");
    const auto sigma = parse_number<double>(parts[2], spec, "SIGMA");
    // SIGMA past 10 puts most of the mass beyond any supported length (and inf draws NaN): refused, not clamped.
    if (!(sigma >= 0.0 && sigma <= 10.0) || !(mu > -50.0 && mu < 30.0)) {
      fail("dataset = '{}': need -50 < MU < 30 and 0 <= SIGMA <= 10", spec);
    }
    return std::make_unique<LognormalSource>(mu, sigma, seed);
  }
  if (spec.starts_with("file:")) {
    return std::make_unique<PoolSource>(read_lengths_file(std::string(spec.substr(5))), seed);
  }
  fail("dataset = '{}': expected pretrain, prolong, uniform:MIN:MAX, lognormal:MU:SIGMA or file:PATH", spec);
}

}  // namespace fulcrum
