// The JSON plan format (layout in serialize.hpp). Writing is direct; reading goes through the checked
// cursors of core/json_reader.hpp, so every error names the exact field ("plan.programs[0].rank").
#include "fulcrum/plan/serialize.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/core/json_reader.hpp"

#include <array>
#include <limits>
#include <nlohmann/json.hpp>
#include <string_view>
#include <utility>

namespace fulcrum {
namespace {

using nlohmann::json;

constexpr std::string_view kFormat = "fulcrum-plan";

// ---- Writing ----

// A slice over every head is [buffer, row, rows], as before slices had heads; a head range adds two.
// Every head is the default HeadRange (written as three numbers); any other range, even one that also means
// every head ([5, -1]), is written as it is, so that a plan reads back exactly (python/tests/test_plan_fuzz.py
// found [5, -1] read, then written as three numbers and read back as [0, -1]).
json slice_json(const Slice& s) {
  if (s.heads == HeadRange{}) return json::array({s.buffer, s.row, s.rows});
  return json::array({s.buffer, s.row, s.rows, s.heads.begin, s.heads.end});
}
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
    if (item.heads != HeadRange{}) j["heads"] = json::array({item.heads.begin, item.heads.end});
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
    j.update({{"q", op.q},
              {"k", op.k},
              {"v", op.v},
              {"o", op.o},
              {"lse", op.lse},
              {"d_o", op.d_o},
              {"dq", op.dq},
              {"dk", op.dk},
              {"dv", op.dv}});
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
    buffers.push_back({{"name", b.name},
                       {"field", to_string(b.field)},
                       {"rows", b.rows},
                       {"init", to_string(b.init)},
                       {"output", b.output}});
  }
  json instructions = json::array();
  for (const auto& instruction : p.instructions) {
    json j = {{"op", operation_name(instruction.op)}, {"stream", instruction.stream}};
    std::visit(OperationWriter{j}, instruction.op);
    instructions.push_back(std::move(j));
  }
  return {{"rank", p.rank},
          {"owned", std::move(owned)},
          {"buffers", std::move(buffers)},
          {"instructions", std::move(instructions)}};
}

// ---- Reading: through core/json_reader.hpp, whose cursors carry the JSON path, so every error names
// the exact field ("plan.programs[0].rank"). ----

template <class T>
std::vector<T> list_at(const JsonValue& object, const char* key, T (*read)(const JsonValue&)) {
  std::vector<T> out;
  for (const auto& element : object.at(key).elements()) out.push_back(read(element));
  return out;
}

Slice read_slice(const JsonValue& j) {
  const auto a = j.elements(3, 5, "[buffer, row, rows] or [buffer, row, rows, head begin, head end]");
  if (a.size() == 4) j.fail_because("must be [buffer, row, rows] or [buffer, row, rows, head begin, head end]");
  Slice s{a[0].integer<int>(), a[1].integer<Tokens>(), a[2].integer<Tokens>()};
  if (a.size() == 5) s.heads = {a[3].integer<int>(), a[4].integer<int>()};
  return s;
}

RowSpan read_span(const JsonValue& j) {
  const auto a = j.elements(3, 3, "[row, position, count]");
  return {a[0].integer<Tokens>(), a[1].integer<Tokens>(), a[2].integer<Tokens>()};
}

Message read_message(const JsonValue& j) {
  return {j.at("peer").integer<int>(), j.at("tag").integer<int>(), read_slice(j.at("slice"))};
}

AttentionItem read_item(const JsonValue& j) {
  AttentionItem item;
  item.doc = j.at("doc").integer<int>();
  const auto queries = j.at("queries").elements(1, 2, "[span] or [span, span]");
  for (std::size_t i = 0; i < queries.size(); ++i) item.queries[i] = read_span(queries[i]);
  item.keys = read_span(j.at("keys"));
  if (const auto heads = j.find("heads")) {
    const auto h = heads->elements(2, 2, "[begin, end]");
    item.heads = {h[0].integer<int>(), h[1].integer<int>()};
  }
  return item;
}

/// Reads one operation's fields, after the "op" name has chosen its alternative.
struct OperationReader {
  const JsonValue& j;
  int integer(const char* key) const { return j.at(key).integer<int>(); }
  void operator()(CommLaunch& op) const {
    op.id = integer("id");
    op.sends = list_at(j, "sends", read_message);
    op.receives = list_at(j, "receives", read_message);
    op.kind = j.at("kind").parsed(parse_comm_kind);
  }
  void operator()(CommWait& op) const { op.launch = integer("launch"); }
  template <class Op>
  void read_inputs(Op& op) const {
    op.q = integer("q");
    op.k = integer("k");
    op.v = integer("v");
    op.o = integer("o");
    op.lse = integer("lse");
    op.items = list_at(j, "items", read_item);
  }
  void operator()(Attention& op) const { read_inputs(op); }
  void operator()(AttentionBackward& op) const {
    read_inputs(op);
    op.d_o = integer("d_o");
    op.dq = integer("dq");
    op.dk = integer("dk");
    op.dv = integer("dv");
  }
  void operator()(Reduce& op) const {
    op.out = read_slice(j.at("out"));
    op.out_lse = read_slice(j.at("out_lse"));
    op.parts = list_at(j, "parts", read_slice);
    op.part_lse = list_at(j, "part_lse", read_slice);
  }
  void operator()(Copy& op) const {
    op.src = read_slice(j.at("src"));
    op.dst = read_slice(j.at("dst"));
  }
};

/// One default operation per "op" name. The names come from operation_name itself, so the reader accepts
/// exactly what the writer writes (merge and sum are the two ReduceOps).
const std::array<Operation, 7>& operation_prototypes() {
  static const std::array<Operation, 7> prototypes{CommLaunch{},
                                                   CommWait{},
                                                   Attention{},
                                                   AttentionBackward{},
                                                   Reduce{ReduceOp::kMerge, {}, {}, {}, {}},
                                                   Reduce{ReduceOp::kSum, {}, {}, {}, {}},
                                                   Copy{}};
  return prototypes;
}

Operation parse_operation(const std::string& name) {
  std::string allowed;
  for (const auto& prototype : operation_prototypes()) {
    if (name == operation_name(prototype)) return prototype;
    allowed += fmt::format("{}{}", allowed.empty() ? "" : ", ", operation_name(prototype));
  }
  fail("must be one of {}", allowed);
}

Instruction read_instruction(const JsonValue& j) {
  Instruction instruction;
  instruction.op = j.at("op").parsed(parse_operation);
  instruction.stream = j.at("stream").integer<int>();
  std::visit(OperationReader{j}, instruction.op);
  return instruction;
}

Buffer read_buffer(const JsonValue& j) {
  Buffer b;
  b.name = j.at("name").string();
  b.field = j.at("field").parsed(parse_field);
  b.rows = j.at("rows").integer<Tokens>();
  b.init = j.at("init").parsed(parse_buffer_init);
  b.output = j.at("output").boolean();
  return b;
}

OwnedRows read_owned(const JsonValue& j) {
  OwnedRows rows;
  rows.doc = j.at("doc").integer<int>();
  const auto tokens = j.at("tokens").elements(2, 2, "[begin, end]");
  rows.tokens = {tokens[0].integer<Tokens>(), tokens[1].integer<Tokens>()};
  rows.row = j.at("row").integer<Tokens>();
  return rows;
}

Program read_program(const JsonValue& j) {
  Program p;
  p.rank = j.at("rank").integer<int>();
  p.owned = list_at(j, "owned", read_owned);
  p.buffers = list_at(j, "buffers", read_buffer);
  p.instructions = list_at(j, "instructions", read_instruction);
  return p;
}

PlanDocument read_document(const JsonValue& j) {
  PlanDocument doc;
  doc.length = j.at("length").integer<Tokens>();
  doc.mask = j.at("mask").parsed(MaskSpec::parse);
  if (const auto masks = j.find("head_masks")) {
    for (const auto& m : masks->elements()) doc.head_masks.push_back(m.parsed(MaskSpec::parse));
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
  return {
      {"format", kFormat},
      {"version", kPlanFormatVersion},
      {"pass", to_string(plan.pass)},
      {"planner", plan.planner},
      {"mode", to_string(plan.mode)},
      {"nano_batches", plan.nano_batches},
      {"heads",
       {{"q_heads", h.q_heads}, {"kv_heads", h.kv_heads}, {"head_dim", h.head_dim}, {"dtype_bytes", h.dtype_bytes}}},
      {"documents", std::move(documents)},
      {"programs", std::move(programs)}};
}

Plan plan_from_json(const JsonValue& j) {
  j.at("format").parsed([](const std::string& format) {
    if (format != kFormat) fail("must be '{}'", kFormat);
    return format;
  });
  const JsonValue version = j.at("version");
  if (version.integer<int>() != kPlanFormatVersion) {
    version.fail_because(fmt::format("this build reads version {}", kPlanFormatVersion));
  }
  Plan plan;
  plan.pass = j.at("pass").parsed(parse_pass);
  plan.planner = j.at("planner").string();
  plan.mode = j.at("mode").parsed([](std::string_view t) { return parse_comm_mode(t, "mode"); });
  plan.nano_batches = j.at("nano_batches").integer<int>();
  const JsonValue heads = j.at("heads");
  plan.heads.q_heads = heads.at("q_heads").integer<int>();
  plan.heads.kv_heads = heads.at("kv_heads").integer<int>();
  plan.heads.head_dim = heads.at("head_dim").integer<int>();
  plan.heads.dtype_bytes = heads.at("dtype_bytes").integer<int>();
  plan.documents = list_at(j, "documents", read_document);
  plan.programs = list_at(j, "programs", read_program);
  return plan;
}

Plan plan_from_json(const json& j) { return plan_from_json(JsonValue(j, "", "plan")); }

}  // namespace fulcrum
