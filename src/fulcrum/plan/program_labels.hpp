// The symbolic machine behind verify_plan: runs Programs on labels instead of values. A label says
// which document token and field a row holds, or, for outputs, how many attention contributions were
// added into it and a hash of which ones; the hash sums make "each contribution exactly once" checkable
// without storing lists.
//
// A plan that cuts heads anywhere (an item or a slice over some heads) is tracked per (row, head): every
// row of a buffer has one label per head of its field, each naming the head it holds, so a message that
// misses a head an item reads, or moves a head to another head's place, is caught where the data is used.
// Plans over whole rows keep one label per row, as cheap as before heads existed.
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

/// Whether a plan cuts heads anywhere (an item or a slice over some heads): then its labels are kept per
/// head, one per head of a buffer's field in each row, else one per row.
bool cuts_heads(const Plan& plan);

enum class LabelState : std::uint8_t { kUndefined, kZero, kValue };

struct Label {
  int doc = -1;
  Field field = Field::kQ;
  LabelState state = LabelState::kUndefined;
  Tokens position = 0;
  std::uint32_t contributions = 0;  // > 0: an output row; state is kValue
  std::uint64_t hash = 0;           // sum of the contributions' ids
  int head = -1;                    // the field's head it holds; -1 where rows are tracked whole
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
  using MessageKey = std::tuple<int, int, int>;          // (source, destination, tag)
  using TokenKey = std::tuple<int, Tokens, Field, int>;  // (doc, position, field, head or -1)
  struct Cells {
    int begin = 0, end = 1;  // the labels [begin, end) of each row a slice or an item touches
  };

  template <typename... Args>
  void error(fmt::format_string<Args...> format, Args&&... args);

  /// Labels per row of a buffer: its field's heads when heads are tracked, else 1.
  int width(int rank, int buffer) const;
  /// The labels of each row that a slice covers, or that work over q heads `q` reads or writes of `buffer`.
  Cells cells(int rank, const Slice& s) const;
  Cells cells(int rank, int buffer, HeadRange q) const;
  Label& label(int rank, int buffer, Tokens row, int cell) {
    return labels_[rank][buffer][static_cast<std::size_t>(row * width(rank, buffer) + cell)];
  }
  /// The head a label of `cell` should name: the cell when heads are tracked, else -1.
  int head_of(int cell) const { return per_head_ ? cell : -1; }
  /// The slice's labels, row by row.
  std::vector<Label> gather(int rank, const Slice& s);
  bool readable(int rank, std::size_t at, const Slice& s, const char* what);
  void write(int rank, std::size_t at, const Slice& dst, const std::vector<Label>& values);
  void expect_value(int rank, std::size_t at, int buffer, Tokens row, int cell, int doc, Tokens position, Field field);
  void contribute(int rank, std::size_t at, int buffer, Tokens row, int cell, int doc, Tokens position,
                  std::uint64_t id, bool accumulate);
  void check_items(int rank, std::size_t at, const std::vector<AttentionItem>& items, std::span<const int> q_side,
                   int k, int v);
  /// Per item: whether another item of the call writes some of its rows (over disjoint heads, else an error).
  std::vector<char> shared_rows(int rank, std::size_t at, const std::vector<AttentionItem>& items);
  void attention(int rank, std::size_t at, const Attention& a);
  void attention_backward(int rank, std::size_t at, const AttentionBackward& a);
  void reduce(int rank, std::size_t at, const Reduce& r);
  /// Rows an instruction reads (or writes) must not be under a pending receive (or a pending send) of
  /// the same heads.
  void touch(int rank, std::size_t at, const Slice& s, bool write);
  void touch_buffer(int rank, std::size_t at, int buffer, bool write);

  const Plan& plan_;
  std::vector<std::string>& errors_;
  bool per_head_ = false;                                // some item or slice covers only some heads
  std::vector<std::vector<std::vector<Label>>> labels_;  // [rank][buffer][row * width + head]
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
