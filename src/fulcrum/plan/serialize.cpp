// save_plan / load_plan: the file side of serialisation. The encodings live in serialize_json.cpp and
// serialize_binary.cpp; this file only picks one by extension and puts the path into every error.
#include "fulcrum/plan/serialize.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/core/input_file.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

namespace fulcrum {
namespace {

bool is_json_path(const std::string& path) { return path.ends_with(".json"); }

}  // namespace

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
  const std::string text = read_input_file(path, fmt::format("plan file '{}'", path));
  // JSON: the reader names the file and the field ("plan.json: plan.version = 2: ...").
  if (is_json_path(path)) return plan_from_json(JsonDocument::parse(text, path, "plan").root());
  // Binary: the decoder names the field; this adds the file, keeping the error's kind.
  try {
    return plan_from_binary({reinterpret_cast<const std::uint8_t*>(text.data()), text.size()});
  } catch (const Error& e) {
    throw Error(fmt::format("plan file '{}': {}", path, e.what()), e.kind());
  }
}

}  // namespace fulcrum
