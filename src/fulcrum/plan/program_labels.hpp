// The symbolic machine behind verify_plan: runs Programs on labels instead of values. A label says
// which document token and field a row holds, or, for outputs, how many attention contributions were
// added into it and a hash of which ones; the hash sums make "each contribution exactly once" checkable
// without storing lists.
#pragma once

#include "fulcrum/plan/program.hpp"
#include <fmt/format.h>

#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <vector>

namespace fulcrum::program_labels {

enum class LabelState : std::uint8_t { kUndefined, kZero, kValue };

struct Label {
  int doc = -1;
  Field field = Field::kQ;
  LabelState state = LabelState::kUndefined;
  Tokens position = 0;
  std::uint32_t contributions = 0;  // > 0: an output row; state is kValue
  std::uint64_t hash = 0;           // sum of the contributions' ids
};

class Machine {
 public:
  Machine(const Plan& plan, std::vector<std::string>& errors);

  /// False only for a wait whose messages cannot all complete yet.
  bool ready(int rank, const Operation& op) const;
  void step(int rank, std::size_t at, const Operation& op);
  /// After every program ran: each contribution reached its owner's output row exactly once.
  void check_outputs();

 private:
  using MessageKey = std::tuple<int, int, int>;  // (source, destination, tag)
  using TokenKey = std::tuple<int, Tokens, Field>;

  template <typename... Args>
  void error(fmt::format_string<Args...> format, Args&&... args);

  std::vector<Label>& rows(int rank, int buffer) { return labels_[rank][buffer]; }
  bool readable(int rank, std::size_t at, const Slice& s, const char* what);
  void write(int rank, std::size_t at, const Slice& dst, const std::vector<Label>& values);
  void expect_value(int rank, std::size_t at, int buffer, Tokens row, int doc, Tokens position, Field field);
  void contribute(int rank, std::size_t at, int buffer, Tokens row, int doc, Tokens position, std::uint64_t id,
                  bool accumulate);
  void check_items(int rank, std::size_t at, const std::vector<AttentionItem>& items, std::span<const int> q_side,
                   int k, int v);
  /// Per item: whether another item of the call writes some of its rows (over disjoint heads, else an error).
  std::vector<char> shared_rows(int rank, std::size_t at, const std::vector<AttentionItem>& items);
  void attention(int rank, std::size_t at, const Attention& a);
  void attention_backward(int rank, std::size_t at, const AttentionBackward& a);
  void reduce(int rank, std::size_t at, const Reduce& r);
  /// Rows an instruction reads (or writes) must not be under a pending receive (or a pending send).
  void touch(int rank, std::size_t at, const Slice& s, bool write);
  void touch_buffer(int rank, std::size_t at, int buffer, bool write);

  const Plan& plan_;
  std::vector<std::string>& errors_;
  std::vector<std::vector<std::vector<Label>>> labels_;  // [rank][buffer][row]
  std::map<MessageKey, std::vector<Label>> wire_;        // what each launched send carries
  std::set<MessageKey> posted_receives_;
  std::vector<std::map<int, const CommLaunch*>> running_;  // [rank] launch id -> launch
  struct InFlight {
    int launch = 0;
    Slice slice;
    bool receive = false;
  };
  std::vector<std::vector<InFlight>> in_flight_;                          // [rank]
  std::map<TokenKey, std::pair<std::uint64_t, std::uint64_t>> expected_;  // (count, hash) per output token
};

}  // namespace fulcrum::program_labels
