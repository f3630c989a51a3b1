// Plans on disk: JSON for people (and diffs), a compact binary for speed. Both encodings are checked for
// well-formedness only — every required field present, of the right type and width, enum values and
// masks that parse, no truncation or trailing bytes — and any violation throws a bad-input fulcrum::Error
// naming the offending place. Whether the plan makes sense (buffers defined before use, sends matching
// receives, coverage) is `verify`'s job, so a wrong-but-well-formed plan loads and can be inspected.
//
// JSON layout ("format": "fulcrum-plan", "version": 3):
//   { "format", "version", "pass": "forward"|"backward", "planner", "mode": to_string(CommMode), "nano_batches",
//     "heads": {"q_heads", "kv_heads", "head_dim", "dtype_bytes"},
//     "documents": [{"length", "mask": MaskSpec::to_string(), "head_masks": [mask text per q head]}],
//     "programs": [{"rank", "owned": [{"doc", "tokens": [begin, end], "row"}],
//                   "buffers": [{"name", "field", "rows", "init", "output"}],
//                   "instructions": [{"op": operation_name(op), "stream", ...the op's fields}]}] }
//   Slices are [buffer, row, rows], or [buffer, row, rows, head begin, head end] for a slice over some of
//   its field's heads (Slice::heads); RowSpans are [row, position, count]; an attention item is
//   {"doc", "queries": [span] or [span, span], "keys": span, "heads": [begin, end]} (the second query span
//   is written only when it is not all zeros, "heads" only for a head range other than all heads, and
//   "head_masks" only for a document with per-head masks).
//   Ops: launch {id, sends, receives: [{peer, tag, slice}], kind} (both lists in posting order, program.hpp),
//   wait {launch}, attention {q, k, v, o, lse, items}, attention-backward {q, k, v, o, lse, d_o, dq, dk, dv,
//   items}, merge|sum {out, out_lse, parts, part_lse}, copy {src, dst}. Unknown keys are ignored.
//
// Head ranges and per-head masks are optional fields: an item's "heads": [begin, end] and a slice's two
// head numbers only when they cover some heads, a document's "head_masks" only when its heads differ
// (binary: an item's heads as two i32 after its keys, a slice's as two i32 after its rows, a document's
// head_masks as a mask list after its mask, always).
//
// Binary layout (little-endian): "FCPL", u32 version = 3, then the plan's fields in declaration order:
// int as i32, Tokens as i64, enums, bools and the op's variant index as u8, strings and list lengths as
// u32 count + contents, masks as their to_string() text. One schema function per type drives both the
// writer and the reader (serialize_binary.cpp), so the two directions cannot drift apart.
#pragma once

#include "fulcrum/core/json_reader.hpp"
#include "fulcrum/plan/program.hpp"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace fulcrum {

/// The version both encodings write and the only one they read.
/// 2: "mode" and "nano_batches" replace "schedule". 3: slices carry heads (binary: always; JSON: when not
/// all), so a version-2 binary would be misread; both encodings check the one version.
inline constexpr int kPlanFormatVersion = 3;

nlohmann::json to_json(const Plan& plan);
/// Errors name the JSON path, e.g. "plan.programs[2].instructions[5].op = 'foo': must be one of ...".
Plan plan_from_json(const nlohmann::json& json);
/// The same from a JSON reader cursor (core/json_reader.hpp): errors also name its file.
Plan plan_from_json(const JsonValue& json);

std::vector<std::uint8_t> to_binary(const Plan& plan);
/// Errors start with "plan binary:" and name the byte offset and the field being read.
Plan plan_from_binary(std::span<const std::uint8_t> bytes);

/// Writes JSON when `path` ends in ".json", the binary format otherwise. Errors name the path.
void save_plan(const Plan& plan, const std::string& path);
/// Reads JSON when `path` ends in ".json", the binary format otherwise. Errors name the path.
Plan load_plan(const std::string& path);

}  // namespace fulcrum
