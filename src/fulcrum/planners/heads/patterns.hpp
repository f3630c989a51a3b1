// FlexAttn's head pattern report: which sparse-attention pattern each query head of each layer uses, with
// its parameters, and how a pattern becomes a MaskSpec the kernels run. The solvers only see costs; the
// prefill runtime runs each head's real mask (`to_mask`).
//
// JSON format (docs/cli.md, `fulcrum heads --patterns`; example: data/heads/llama3-8b-262k-minference.json):
//   { "model": "llama3-8b-262k",             optional, a name for reports
//     "description": "...",                  optional, free text (how the file was made)
//     "q_heads": 32, "kv_heads": 8,          kv_heads divides q_heads; GQA group of head h = h / (q / kv)
//     "layers": [ { "heads": [ HEAD, ... q_heads entries ] }, ... at least one layer ] }
//   HEAD is one of
//     { "kind": "full" }                                        causal, every earlier key
//     { "kind": "a-shape", "sink": S, "window": W }             S leading keys + the last W keys (itself included)
//     { "kind": "vertical-slash", "verticals": V, "slashes": L }  V key columns + L diagonals (budgets)
//     { "kind": "block-sparse", "block": B, "blocks": K }       per B-row block: K key blocks, or
//     { "kind": "block-sparse", "block": B, "density": P }      a fraction P of the causal blocks
//   Errors name the field's path, e.g. "f.json: patterns.layers[3].heads[7].window = 0: must be in [1, 16777216]".
#pragma once

#include "fulcrum/core/interval.hpp"
#include "fulcrum/core/json_reader.hpp"
#include "fulcrum/workload/mask.hpp"
#include "fulcrum/workload/model_shape.hpp"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fulcrum::heads {

enum class PatternKind : std::uint8_t { kFull, kAShape, kVerticalSlash, kBlockSparse };

/// "full", "a-shape", "vertical-slash", "block-sparse": the JSON `kind` names.
std::string_view pattern_kind_name(PatternKind kind);

/// Parameter ranges (tokens, blocks): large enough for any prompt Fulcrum runs, small enough to catch typos.
inline constexpr Tokens kMaxPatternTokens = Tokens{1} << 24;
inline constexpr Tokens kMaxBlockTokens = 65536;

struct HeadPattern {
  PatternKind kind = PatternKind::kFull;
  Tokens sink = 0;       // a-shape: leading keys every row sees, in [0, 2^24]
  Tokens window = 0;     // a-shape: keys back from the row, itself included, in [1, 2^24]
  Tokens verticals = 0;  // vertical-slash: budget of key columns, in [0, 2^24]
  Tokens slashes = 0;    // vertical-slash: budget of diagonals, in [1, 2^24] (the main diagonal is always one)
  Tokens block = 0;      // block-sparse: tokens per block, in [1, 65536]
  Tokens blocks = 0;     // block-sparse: key blocks kept per query block, in [1, 2^24]; or 0 when density is set
  double density = 0;    // block-sparse: share of the causal blocks kept, in (0, 1]; or 0 when blocks is set

  static HeadPattern full() { return {}; }
  static HeadPattern a_shape(Tokens sink, Tokens window);
  static HeadPattern vertical_slash(Tokens verticals, Tokens slashes);
  static HeadPattern block_sparse_blocks(Tokens block, Tokens blocks);
  static HeadPattern block_sparse_density(Tokens block, double density);

  /// The pattern key of a runtime profile: the kind and its parameters ("full", "a-shape:128:4096",
  /// "vertical-slash:1000:6096", "block-sparse:64:blocks=100", "block-sparse:64:density=0.1"), so two
  /// heads with different budgets have different keys. `parse` reads it back.
  std::string key() const;
  static HeadPattern parse(std::string_view key);
  /// Bad input naming `where` (a JSON path or flag) and the parameter, its value and allowed range.
  void validate(std::string_view where) const;

  friend bool operator==(const HeadPattern&, const HeadPattern&) = default;
};

/// One layer's patterns, one per q head.
using LayerPatterns = std::vector<HeadPattern>;

struct HeadPatternReport {
  std::string model;
  std::string description;
  int q_heads = 0;
  int kv_heads = 0;
  std::vector<LayerPatterns> layers;

  /// Fails (naming `patterns.q_heads` / `patterns.kv_heads` / `patterns.layers`) unless the report's heads
  /// are the model's and it has a layer for each of the model's (layer l runs the report's layer l; layers
  /// past the model's are ignored, so a 32-layer report drives a shrunk model).
  void check_model(const ModelShape& model) const;
};

/// Reads the format above; `source` names the file in errors (empty for JSON handed over in memory).
HeadPatternReport head_patterns_from_json(const JsonValue& root);
HeadPatternReport head_patterns_from_json(const nlohmann::json& json, std::string source = {});
HeadPatternReport read_head_patterns(const std::string& path);
nlohmann::json to_json(const HeadPatternReport& report);
nlohmann::json to_json(const HeadPattern& pattern);

/// The mask one head runs over a prompt of `prompt_len` tokens (budgets larger than the prompt are cut to it).
///  - full: causal. a-shape: lambda:SINK:WINDOW.
///  - vertical-slash: half of each budget (rounded up) is the leading columns [0, ceil(v/2)) and the nearest
///    diagonals [0, ceil(s/2)) (sink and local window, which estimated patterns always contain), the other
///    half drawn from the rest of the prompt without replacement, seeded. Content-dependent lines are
///    scattered in real patterns; taking only leading columns and near diagonals would make every
///    vertical-slash head an A-shape, whose tiles (and kernel time) are not those of a scattered pattern.
///  - block-sparse: query block i keeps k_i of its i + 1 causal key blocks: k_i = min(i + 1, blocks), or
///    max(1, round(density x (i + 1))) (so its pairs are about density x the causal pairs): the diagonal
///    block first (every row sees itself), then block 0 (the sink), then k_i - 2 blocks among 1..i-1 drawn
///    without replacement, seeded.
/// The same (pattern, prompt_len, seed) gives the same mask everywhere; per-head masks take
/// `head_mask_seed(seed, layer, head)`.
MaskSpec to_mask(const HeadPattern& pattern, Tokens prompt_len, std::uint64_t seed);
std::uint64_t head_mask_seed(std::uint64_t seed, int layer, int head);
/// Every head's mask of the report's first `layers` layers: [layer][q head], by to_mask with head_mask_seed.
/// The one mapping from patterns to masks the prefill runs (and `fulcrum profile --heads` times).
std::vector<std::vector<MaskSpec>> report_masks(const HeadPatternReport& report, int layers, Tokens prompt_len,
                                                std::uint64_t seed);

}  // namespace fulcrum::heads
