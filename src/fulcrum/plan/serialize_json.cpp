// The JSON plan format (layout in serialize.hpp). Writing is direct; reading goes through a few checked
// accessors that carry the JSON path, so every error names the exact field ("plan.programs[0].rank").
#include "fulcrum/plan/serialize.hpp"

#include "fulcrum/core/error.hpp"

#include <array>
#include <limits>
#include <string_view>
#include <utility>

namespace fulcrum {
namespace {

using nlohmann::json;

constexpr std::string_view kFormat = "fulcrum-plan";

// ---- Writing ----

json slice_json(const Slice& s) { return json::array({s.buffer, s.row, s.rows}); }
json span_json(const RowSpan& s) { return json::array({s.row, s.position, s.count}); }

json slices_json(const std::vector<Slice>& slices) {
  json out = json::array();
  for (const auto& s : slices) out.push_back(slice_json(s));
  return out;
}

json messages_json(const std::vector<Message>& messages) {
  json out = json::array();
  for (const auto& m : messages) out.push_back({{"peer", m.peer}, {"tag", m.tag}, {"slice", slice_json(m.slice)}});
  return out;
}

json items_json(const std::vector<AttentionItem>& items) {
  json out = json::array();
  for (const auto& item : items) {
    json queries = json::array({span_json(item.queries[0])});
    // A single query span is the common case; the empty second span is left out to keep files readable.
    if (item.queries[1] != RowSpan{}) queries.push_back(span_json(item.queries[1]));
    json j = {{"doc", item.doc}, {"queries", std::move(queries)}, {"keys", span_json(item.keys)}};
    if (!item.heads.all()) j["heads"] = json::array({item.heads.begin, item.heads.end});
    out.push_back(std::move(j));
  }
  return out;
}

/// Adds the fields of one operation to its instruction object.
struct OperationWriter {
  json& j;
  void operator()(const CommLaunch& op) const {
    j["id"] = op.id;
    j["sends"] = messages_json(op.sends);
    j["receives"] = messages_json(op.receives);
    j["kind"] = to_string(op.kind);
  }
  void operator()(const CommWait& op) const { j["launch"] = op.launch; }
  void operator()(const Attention& op) const {
    j.update({{"q", op.q}, {"k", op.k}, {"v", op.v}, {"o", op.o}, {"lse", op.lse}});
    j["items"] = items_json(op.items);
  }
  void operator()(const AttentionBackward& op) const {
    j.update({{"q", op.q}, {"k", op.k}, {"v", op.v}, {"o", op.o}, {"lse", op.lse}, {"d_o", op.d_o}, {"dq", op.dq},
              {"dk", op.dk}, {"dv", op.dv}});
    j["items"] = items_json(op.items);
  }
  // The reduce op is already in the instruction's "op" name (merge or sum).
  void operator()(const Reduce& op) const {
    j["out"] = slice_json(op.out);
    j["out_lse"] = slice_json(op.out_lse);
    j["parts"] = slices_json(op.parts);
    j["part_lse"] = slices_json(op.part_lse);
  }
  void operator()(const Copy& op) const {
    j["src"] = slice_json(op.src);
    j["dst"] = slice_json(op.dst);
  }
};

json program_json(const Program& p) {
  json owned = json::array();
  for (const auto& o : p.owned) {
    owned.push_back({{"doc", o.doc}, {"tokens", json::array({o.tokens.begin, o.tokens.end})}, {"row", o.row}});
  }
  json buffers = json::array();
  for (const auto& b : p.buffers) {
    buffers.push_back({{"name", b.name}, {"field", to_string(b.field)}, {"rows", b.rows},
                       {"init", to_string(b.init)}, {"output", b.output}});
  }
  json instructions = json::array();
  for (const auto& instruction : p.instructions) {
    json j = {{"op", operation_name(instruction.op)}, {"stream", instruction.stream}};
    std::visit(OperationWriter{j}, instruction.op);
    instructions.push_back(std::move(j));
  }
  return {{"rank", p.rank}, {"owned", std::move(owned)}, {"buffers", std::move(buffers)},
          {"instructions", std::move(instructions)}};
}

// ---- Reading: checked accessors. `path` is always the path of the value being read. ----

/// A value as shown in an error: its JSON text, cut short so that a misplaced program stays one line.
std::string shown(const json& j) {
  std::string text = j.dump();
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

const json& member(const json& object, const std::string& path, const char* key) {
  if (!object.is_object()) fail("{} = {}: must be an object", path, shown(object));
  const auto it = object.find(key);
  if (it == object.end()) fail("{}.{}: missing", path, key);
  return *it;
}

template <class T>
T integer(const json& j, const std::string& path) {
  constexpr auto kMin = std::numeric_limits<T>::min();
  constexpr auto kMax = std::numeric_limits<T>::max();
  if (!j.is_number_integer()) fail("{} = {}: must be an integer", path, shown(j));
  const bool in_range = j.is_number_unsigned() ? j.get<std::uint64_t>() <= static_cast<std::uint64_t>(kMax)
                                               : j.get<std::int64_t>() >= kMin && j.get<std::int64_t>() <= kMax;
  if (!in_range) fail("{} = {}: must be in [{}, {}]", path, shown(j), kMin, kMax);
  return static_cast<T>(j.get<std::int64_t>());
}

std::string string(const json& j, const std::string& path) {
  if (!j.is_string()) fail("{} = {}: must be a string", path, shown(j));
  return j.get<std::string>();
}

const json& array(const json& j, const std::string& path, std::size_t min_size, std::size_t max_size,
                  std::string_view shape) {
  if (!j.is_array() || j.size() < min_size || j.size() > max_size) fail("{} = {}: must be {}", path, shown(j), shape);
  return j;
}

template <class T>
T int_at(const json& object, const std::string& path, const char* key) {
  return integer<T>(member(object, path, key), fmt::format("{}.{}", path, key));
}

/// Reads an enum with one of program.hpp's parse_* functions, adding the JSON path to its message.
template <class Parse>
auto enum_at(const json& object, const std::string& path, const char* key, Parse parse) {
  const std::string at = fmt::format("{}.{}", path, key);
  const std::string text = string(member(object, path, key), at);
  try {
    return parse(text);
  } catch (const Error& e) {
    fail("{}: {}", at, e.what());
  }
}

template <class T, class Read>
std::vector<T> list_at(const json& object, const std::string& path, const char* key, Read read) {
  const std::string at = fmt::format("{}.{}", path, key);
  const json& items = array(member(object, path, key), at, 0, std::numeric_limits<std::size_t>::max(), "an array");
  std::vector<T> out;
  out.reserve(items.size());
  for (std::size_t i = 0; i < items.size(); ++i) out.push_back(read(items[i], fmt::format("{}[{}]", at, i)));
  return out;
}

Slice read_slice(const json& j, const std::string& path) {
  const json& a = array(j, path, 3, 3, "[buffer, row, rows]");
  return {integer<int>(a[0], path + "[0]"), integer<Tokens>(a[1], path + "[1]"), integer<Tokens>(a[2], path + "[2]")};
}

Slice slice_at(const json& object, const std::string& path, const char* key) {
  return read_slice(member(object, path, key), fmt::format("{}.{}", path, key));
}

RowSpan read_span(const json& j, const std::string& path) {
  const json& a = array(j, path, 3, 3, "[row, position, count]");
  return {integer<Tokens>(a[0], path + "[0]"), integer<Tokens>(a[1], path + "[1]"),
          integer<Tokens>(a[2], path + "[2]")};
}

Message read_message(const json& j, const std::string& path) {
  return {int_at<int>(j, path, "peer"), int_at<int>(j, path, "tag"), slice_at(j, path, "slice")};
}

AttentionItem read_item(const json& j, const std::string& path) {
  AttentionItem item;
  item.doc = int_at<int>(j, path, "doc");
  const std::string queries_path = path + ".queries";
  const json& queries = array(member(j, path, "queries"), queries_path, 1, 2, "[span] or [span, span]");
  for (std::size_t i = 0; i < queries.size(); ++i) {
    item.queries[i] = read_span(queries[i], fmt::format("{}[{}]", queries_path, i));
  }
  item.keys = read_span(member(j, path, "keys"), path + ".keys");
  if (j.contains("heads")) {
    const json& h = array(j.at("heads"), path + ".heads", 2, 2, "[begin, end]");
    item.heads = {integer<int>(h[0], path + ".heads[0]"), integer<int>(h[1], path + ".heads[1]")};
  }
  return item;
}

/// Reads one operation's fields, after the "op" name has chosen its alternative.
struct OperationReader {
  const json& j;
  const std::string& path;
  void operator()(CommLaunch& op) const {
    op.id = int_at<int>(j, path, "id");
    op.sends = list_at<Message>(j, path, "sends", read_message);
    op.receives = list_at<Message>(j, path, "receives", read_message);
    op.kind = enum_at(j, path, "kind", parse_comm_kind);
  }
  void operator()(CommWait& op) const { op.launch = int_at<int>(j, path, "launch"); }
  template <class Op>
  void read_inputs(Op& op) const {
    op.q = int_at<int>(j, path, "q");
    op.k = int_at<int>(j, path, "k");
    op.v = int_at<int>(j, path, "v");
    op.o = int_at<int>(j, path, "o");
    op.lse = int_at<int>(j, path, "lse");
    op.items = list_at<AttentionItem>(j, path, "items", read_item);
  }
  void operator()(Attention& op) const { read_inputs(op); }
  void operator()(AttentionBackward& op) const {
    read_inputs(op);
    op.d_o = int_at<int>(j, path, "d_o");
    op.dq = int_at<int>(j, path, "dq");
    op.dk = int_at<int>(j, path, "dk");
    op.dv = int_at<int>(j, path, "dv");
  }
  void operator()(Reduce& op) const {
    op.out = slice_at(j, path, "out");
    op.out_lse = slice_at(j, path, "out_lse");
    op.parts = list_at<Slice>(j, path, "parts", read_slice);
    op.part_lse = list_at<Slice>(j, path, "part_lse", read_slice);
  }
  void operator()(Copy& op) const {
    op.src = slice_at(j, path, "src");
    op.dst = slice_at(j, path, "dst");
  }
};

/// One default operation per "op" name. The names come from operation_name itself, so the reader accepts
/// exactly what the writer writes (merge and sum are the two ReduceOps).
const std::array<Operation, 7>& operation_prototypes() {
  static const std::array<Operation, 7> prototypes{CommLaunch{},         CommWait{},
                                                   Attention{},          AttentionBackward{},
                                                   Reduce{ReduceOp::kMerge, {}, {}, {}, {}},
                                                   Reduce{ReduceOp::kSum, {}, {}, {}, {}},
                                                   Copy{}};
  return prototypes;
}

Instruction read_instruction(const json& j, const std::string& path) {
  const std::string op_path = path + ".op";
  const std::string name = string(member(j, path, "op"), op_path);
  Instruction instruction;
  std::string allowed;
  bool known = false;
  for (const auto& prototype : operation_prototypes()) {
    if (name == operation_name(prototype)) {
      instruction.op = prototype;
      known = true;
      break;
    }
    allowed += fmt::format("{}{}", allowed.empty() ? "" : ", ", operation_name(prototype));
  }
  if (!known) fail("{} = '{}': must be one of {}", op_path, name, allowed);
  instruction.stream = int_at<int>(j, path, "stream");
  std::visit(OperationReader{j, path}, instruction.op);
  return instruction;
}

Buffer read_buffer(const json& j, const std::string& path) {
  Buffer b;
  b.name = string(member(j, path, "name"), path + ".name");
  b.field = enum_at(j, path, "field", parse_field);
  b.rows = int_at<Tokens>(j, path, "rows");
  b.init = enum_at(j, path, "init", parse_buffer_init);
  const json& output = member(j, path, "output");
  if (!output.is_boolean()) fail("{}.output = {}: must be true or false", path, shown(output));
  b.output = output.get<bool>();
  return b;
}

OwnedRows read_owned(const json& j, const std::string& path) {
  OwnedRows rows;
  rows.doc = int_at<int>(j, path, "doc");
  const std::string tokens_path = path + ".tokens";
  const json& tokens = array(member(j, path, "tokens"), tokens_path, 2, 2, "[begin, end]");
  rows.tokens = {integer<Tokens>(tokens[0], tokens_path + "[0]"), integer<Tokens>(tokens[1], tokens_path + "[1]")};
  rows.row = int_at<Tokens>(j, path, "row");
  return rows;
}

Program read_program(const json& j, const std::string& path) {
  Program p;
  p.rank = int_at<int>(j, path, "rank");
  p.owned = list_at<OwnedRows>(j, path, "owned", read_owned);
  p.buffers = list_at<Buffer>(j, path, "buffers", read_buffer);
  p.instructions = list_at<Instruction>(j, path, "instructions", read_instruction);
  return p;
}

PlanDocument read_document(const json& j, const std::string& path) {
  PlanDocument doc;
  doc.length = int_at<Tokens>(j, path, "length");
  const std::string text = string(member(j, path, "mask"), path + ".mask");
  try {
    doc.mask = MaskSpec::parse(text);
  } catch (const Error& e) {
    fail("{}.mask = '{}': {}", path, text, e.what());
  }
  if (j.contains("head_masks")) {
    const std::string at = path + ".head_masks";
    const json& masks = array(j.at("head_masks"), at, 0, std::numeric_limits<std::size_t>::max(), "an array");
    for (std::size_t h = 0; h < masks.size(); ++h) {
      const std::string mask_text = string(masks[h], fmt::format("{}[{}]", at, h));
      try {
        doc.head_masks.push_back(MaskSpec::parse(mask_text));
      } catch (const Error& e) {
        fail("{}[{}] = '{}': {}", at, h, mask_text, e.what());
      }
    }
  }
  return doc;
}

}  // namespace

json to_json(const Plan& plan) {
  json documents = json::array();
  for (const auto& doc : plan.documents) {
    json d = {{"length", doc.length}, {"mask", doc.mask.to_string()}};
    if (!doc.head_masks.empty()) {
      json masks = json::array();
      for (const auto& m : doc.head_masks) masks.push_back(m.to_string());
      d["head_masks"] = std::move(masks);
    }
    documents.push_back(std::move(d));
  }
  json programs = json::array();
  for (const auto& program : plan.programs) programs.push_back(program_json(program));
  const auto& h = plan.heads;
  return {{"format", kFormat},
          {"version", plan_format_version(plan)},
          {"pass", to_string(plan.pass)},
          {"planner", plan.planner},
          {"schedule", plan.schedule},
          {"heads", {{"q_heads", h.q_heads}, {"kv_heads", h.kv_heads}, {"head_dim", h.head_dim},
                     {"dtype_bytes", h.dtype_bytes}}},
          {"documents", std::move(documents)},
          {"programs", std::move(programs)}};
}

Plan plan_from_json(const json& j) {
  const std::string path = "plan";
  const std::string format = string(member(j, path, "format"), "plan.format");
  if (format != kFormat) fail("plan.format = '{}': must be '{}'", format, kFormat);
  const int version = int_at<int>(j, path, "version");
  if (version != kPlanFormatVersionAllHeads && version != kPlanFormatVersion) {
    fail("plan.version = {}: this build reads versions {} and {}", version, kPlanFormatVersionAllHeads,
         kPlanFormatVersion);
  }
  Plan plan;
  plan.pass = enum_at(j, path, "pass", parse_pass);
  plan.planner = string(member(j, path, "planner"), "plan.planner");
  plan.schedule = string(member(j, path, "schedule"), "plan.schedule");
  const json& heads = member(j, path, "heads");
  plan.heads.q_heads = int_at<int>(heads, "plan.heads", "q_heads");
  plan.heads.kv_heads = int_at<int>(heads, "plan.heads", "kv_heads");
  plan.heads.head_dim = int_at<int>(heads, "plan.heads", "head_dim");
  plan.heads.dtype_bytes = int_at<int>(heads, "plan.heads", "dtype_bytes");
  plan.documents = list_at<PlanDocument>(j, path, "documents", read_document);
  plan.programs = list_at<Program>(j, path, "programs", read_program);
  return plan;
}

}  // namespace fulcrum
