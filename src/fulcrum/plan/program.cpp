#include "fulcrum/plan/program.hpp"

#include "fulcrum/core/error.hpp"

#include <array>
#include <utility>

namespace fulcrum {
namespace {

// One table per enum, so to_string and parse can never disagree.
constexpr std::array<std::pair<Field, const char*>, 9> kFieldNames{{{Field::kQ, "q"},
                                                                    {Field::kK, "k"},
                                                                    {Field::kV, "v"},
                                                                    {Field::kO, "o"},
                                                                    {Field::kLse, "lse"},
                                                                    {Field::kDO, "d_o"},
                                                                    {Field::kDQ, "dq"},
                                                                    {Field::kDK, "dk"},
                                                                    {Field::kDV, "dv"}}};
constexpr std::array<std::pair<BufferInit, const char*>, 4> kInitNames{{{BufferInit::kInput, "input"},
                                                                        {BufferInit::kZero, "zero"},
                                                                        {BufferInit::kNegInf, "-inf"},
                                                                        {BufferInit::kUndefined, "undefined"}}};
constexpr std::array<std::pair<CommKind, const char*>, 2> kCommKindNames{
    {{CommKind::kDispatch, "dispatch"}, {CommKind::kReturn, "return"}}};
constexpr std::array<std::pair<Pass, const char*>, 2> kPassNames{
    {{Pass::kForward, "forward"}, {Pass::kBackward, "backward"}}};

template <class Enum, std::size_t N>
const char* name_of(const std::array<std::pair<Enum, const char*>, N>& table, Enum value) {
  for (const auto& [e, name] : table) {
    if (e == value) return name;
  }
  return "?";
}

template <class Enum, std::size_t N>
Enum parse_enum(const std::array<std::pair<Enum, const char*>, N>& table, std::string_view what,
                std::string_view text) {
  std::string allowed;
  for (const auto& [e, name] : table) {
    if (text == name) return e;
    allowed += allowed.empty() ? name : fmt::format(", {}", name);
  }
  fail("{} = '{}': must be one of {}", what, text, allowed);
}

}  // namespace

const char* to_string(Field field) { return name_of(kFieldNames, field); }
Field parse_field(std::string_view text) { return parse_enum(kFieldNames, "field", text); }
const char* to_string(BufferInit init) { return name_of(kInitNames, init); }
BufferInit parse_buffer_init(std::string_view text) { return parse_enum(kInitNames, "init", text); }
const char* to_string(CommKind kind) { return name_of(kCommKindNames, kind); }
CommKind parse_comm_kind(std::string_view text) { return parse_enum(kCommKindNames, "kind", text); }
const char* to_string(Pass pass) { return name_of(kPassNames, pass); }
Pass parse_pass(std::string_view text) { return parse_enum(kPassNames, "pass", text); }

bool is_kv_side(Field field) {
  return field == Field::kK || field == Field::kV || field == Field::kDK || field == Field::kDV;
}

int HeadLayout::heads_of(Field field) const { return is_kv_side(field) ? kv_heads : q_heads; }

HeadRange HeadLayout::field_heads(Field field, HeadRange q) const {
  return is_kv_side(field) ? kv_heads_read(q, q_heads, kv_heads) : q.normalized(q_heads);
}

int HeadLayout::element_bytes(Field field) const {
  switch (field) {
    case Field::kQ:
    case Field::kK:
    case Field::kV:
    case Field::kO:
    case Field::kDO: return dtype_bytes;
    default: return 4;
  }
}

const char* operation_name(const Operation& op) {
  struct Namer {
    const char* operator()(const CommLaunch&) const { return "launch"; }
    const char* operator()(const CommWait&) const { return "wait"; }
    const char* operator()(const Attention&) const { return "attention"; }
    const char* operator()(const AttentionBackward&) const { return "attention-backward"; }
    const char* operator()(const Reduce& r) const { return r.op == ReduceOp::kMerge ? "merge" : "sum"; }
    const char* operator()(const Copy&) const { return "copy"; }
  };
  return std::visit(Namer{}, op);
}

Tokens Program::owned_tokens() const {
  Tokens total = 0;
  for (const auto& rows : owned) total += rows.tokens.size();
  return total;
}

int Program::find_buffer(std::string_view name) const {
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    if (buffers[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace fulcrum
