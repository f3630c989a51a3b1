// save_plan / load_plan: the file side of serialisation. The encodings live in serialize_json.cpp and
// serialize_binary.cpp; this file only picks one by extension and puts the path into every error.
#include "fulcrum/plan/serialize.hpp"

#include "fulcrum/core/error.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

namespace fulcrum {
namespace {

bool is_json_path(const std::string& path) { return path.ends_with(".json"); }

}  // namespace

int plan_format_version(const Plan& plan) {
  for (const auto& doc : plan.documents) {
    if (!doc.head_masks.empty()) return kPlanFormatVersion;
  }
  for (const auto& program : plan.programs) {
    for (const auto& instruction : program.instructions) {
      const std::vector<AttentionItem>* items = nullptr;
      if (const auto* a = std::get_if<Attention>(&instruction.op)) items = &a->items;
      if (const auto* b = std::get_if<AttentionBackward>(&instruction.op)) items = &b->items;
      if (!items) continue;
      for (const auto& item : *items) {
        if (!item.heads.all() || item.heads.begin != 0) return kPlanFormatVersion;
      }
    }
  }
  return kPlanFormatVersionAllHeads;
}

void save_plan(const Plan& plan, const std::string& path) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) fail_runtime("plan file '{}': cannot open for writing: {}", path, std::strerror(errno));
  if (is_json_path(path)) {
    out << to_json(plan).dump(1) << '\n';
  } else {
    const auto bytes = to_binary(plan);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  out.close();
  if (!out) fail_runtime("plan file '{}': write failed: {}", path, std::strerror(errno));
}

Plan load_plan(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("plan file '{}': cannot open: {}", path, std::strerror(errno));
  const std::vector<std::uint8_t> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (in.bad()) fail_runtime("plan file '{}': read failed: {}", path, std::strerror(errno));
  // The decoders name the field; this adds the file, keeping the error's kind.
  try {
    if (!is_json_path(path)) return plan_from_binary(bytes);
    nlohmann::json json;
    try {
      json = nlohmann::json::parse(bytes.begin(), bytes.end());
    } catch (const nlohmann::json::parse_error& e) {
      fail("not valid JSON: {}", e.what());
    }
    return plan_from_json(json);
  } catch (const Error& e) {
    throw Error(fmt::format("plan file '{}': {}", path, e.what()), e.kind());
  }
}

}  // namespace fulcrum
