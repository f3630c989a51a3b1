#include "fulcrum/sparse/dynamic_mask.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/core/random.hpp"
#include "fulcrum/workload/mask_kinds.hpp"

#include <algorithm>
#include <charconv>
#include <numeric>

namespace fulcrum::sparse {

VerticalSlashOptions DynamicMaskSpec::options() const {
  VerticalSlashOptions o;
  o.gamma = gamma;
  o.block = block;
  o.cap = std::max(o.cap, block);
  return o;
}

std::optional<DynamicMaskSpec> parse_dynamic_mask(std::string_view text) {
  if (text.substr(0, text.find(':')) != "vslash-dynamic") return std::nullopt;
  std::vector<std::string_view> parts;
  for (std::size_t at = 0;;) {
    const std::size_t colon = text.find(':', at);
    parts.push_back(text.substr(at, colon == std::string_view::npos ? std::string_view::npos : colon - at));
    if (colon == std::string_view::npos) break;
    at = colon + 1;
  }
  if (parts.size() < 2 || parts.size() > 3) {
    fail("mask = '{}': must be vslash-dynamic:GAMMA or vslash-dynamic:GAMMA:G", text);
  }
  DynamicMaskSpec spec;
  const auto [end, ec] = std::from_chars(parts[1].data(), parts[1].data() + parts[1].size(), spec.gamma);
  if (ec != std::errc() || end != parts[1].data() + parts[1].size() || !(spec.gamma > 0 && spec.gamma <= 1)) {
    fail("mask gamma = '{}': must be a number in (0, 1]", parts[1]);
  }
  if (parts.size() == 3) {
    spec.block = mask_detail::parse_tokens(parts[2], "mask block");
    if (spec.block < 1 || spec.block > 4096) fail("mask block = {}: must be in [1, 4096]", spec.block);
  }
  return spec;
}

bool estimates(const DynamicMaskSpec& spec, Tokens length) {
  return length >= std::max(spec.options().window, spec.block);
}

SyntheticAttention synthetic_document(std::uint64_t seed, std::int64_t doc_id, const EstimatorShape& shape,
                                      Tokens length) {
  return {mix64(seed ^ mix64(static_cast<std::uint64_t>(doc_id))), shape.q_heads, shape.kv_heads, shape.head_dim,
          length};
}

MaskSpec to_mask(const VerticalSlashIndex& index) {
  return MaskSpec::vertical_slash_blocks(index.block, index.verticals, index.block_offsets);
}

std::vector<VerticalSlashIndex> synthetic_head_indices(std::uint64_t seed, std::int64_t doc_id,
                                                       const EstimatorShape& shape, Tokens length,
                                                       const DynamicMaskSpec& spec) {
  const VerticalSlashOptions options = spec.options();
  options.validate(length);
  const SyntheticAttention data = synthetic_document(seed, doc_id, shape, length);
  const auto q_obs = data.rows(SyntheticTensor::kQ, {length - options.window, length});
  const auto k = data.rows(SyntheticTensor::kK, {0, length});
  std::vector<Tokens> positions(static_cast<std::size_t>(length));
  std::iota(positions.begin(), positions.end(), Tokens{0});
  return estimate_vertical_slash(shape, length, q_obs, {k, positions}, options).heads;
}

}  // namespace fulcrum::sparse
