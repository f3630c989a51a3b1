#include "fulcrum/prefill/weights_file.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/core/random.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

namespace fulcrum::prefill {

static_assert(std::endian::native == std::endian::little, "the weights file is little-endian, as this host");

namespace {

constexpr char kMagic[8] = {'F', 'U', 'L', 'C', 'R', 'U', 'M', 'W'};
constexpr std::uint32_t kVersion = 1;

// The header as bytes on disk (packed by hand: no struct padding questions).
struct Header {
  std::uint32_t version = kVersion;
  std::uint32_t dtype = 0;
  std::array<std::int32_t, 6> sizes{};  // layers, hidden, q_heads, kv_heads, head_dim, ffn_hidden
  std::uint64_t seed = 0;
};
constexpr const char* kSizeNames[6] = {"layers", "hidden", "q_heads", "kv_heads", "head_dim", "ffn_hidden"};

std::array<std::int32_t, 6> sizes_of(const ModelShape& s) {
  return {s.layers, s.hidden, s.q_heads, s.kv_heads, s.head_dim, s.ffn_hidden};
}

std::array<char, WeightsLayout::kHeaderBytes> encode(const Header& h) {
  std::array<char, WeightsLayout::kHeaderBytes> bytes{};
  std::memcpy(bytes.data(), kMagic, 8);
  std::memcpy(bytes.data() + 8, &h.version, 4);
  std::memcpy(bytes.data() + 12, &h.dtype, 4);
  std::memcpy(bytes.data() + 16, h.sizes.data(), 24);
  std::memcpy(bytes.data() + 40, &h.seed, 8);
  return bytes;
}

// Fan-in of a tensor (its values' variance is 1 / fan_in); 0 for the norm gains.
std::int64_t fan_in(WeightTensor t, const ModelShape& s) {
  switch (t) {
    case WeightTensor::kWo: return static_cast<std::int64_t>(s.q_heads) * s.head_dim;
    case WeightTensor::kWdown: return s.ffn_hidden;
    case WeightTensor::kAttnNorm:
    case WeightTensor::kMlpNorm: return 0;
    default: return s.hidden;
  }
}

void fill_tensor(std::vector<float>& out, WeightTensor t, const ModelShape& s, int layer, std::uint64_t seed) {
  Rng rng(mix64(mix64(seed) ^ mix64(static_cast<std::uint64_t>(layer) * 16 + static_cast<std::uint64_t>(t))));
  const std::int64_t fan = fan_in(t, s);
  if (fan == 0) {
    for (auto& x : out) x = static_cast<float>(0.9 + 0.2 * rng.uniform());
    return;
  }
  const double a = std::sqrt(3.0 / static_cast<double>(fan));
  for (auto& x : out) x = static_cast<float>(a * (2 * rng.uniform() - 1));
}

}  // namespace

const char* to_string(WeightTensor tensor) {
  static constexpr const char* kNames[] = {"attn_norm", "w_q",    "w_k",  "w_v",   "w_o",
                                           "mlp_norm",  "w_gate", "w_up", "w_down"};
  return kNames[static_cast<int>(tensor)];
}

WeightsLayout::WeightsLayout(const ModelShape& s) : layers_(s.layers), hidden_(s.hidden) {
  const std::int64_t qd = static_cast<std::int64_t>(s.q_heads) * s.head_dim;
  const std::int64_t kvd = static_cast<std::int64_t>(s.kv_heads) * s.head_dim;
  const std::int64_t rows[] = {1, qd, kvd, kvd, qd, 1, s.ffn_hidden, s.ffn_hidden, s.ffn_hidden};
  for (int t = 0; t < static_cast<int>(WeightTensor::kCount); ++t) {
    rows_[t] = rows[t];
    row_begin_[t] = layer_rows_;
    layer_rows_ += rows[t];
  }
}

std::int64_t WeightsLayout::offset_bytes(int layer, WeightTensor tensor, std::int64_t row) const {
  FULCRUM_CHECK(layer >= 0 && layer <= layers_, "layer {} of {}", layer, layers_);
  const std::int64_t first = static_cast<std::int64_t>(layer) * layer_rows_ + row_begin_[static_cast<int>(tensor)];
  return kHeaderBytes + (first + row) * hidden_ * static_cast<std::int64_t>(sizeof(float));
}

std::int64_t WeightsLayout::file_bytes() const {
  return kHeaderBytes +
         (static_cast<std::int64_t>(layers_) * layer_rows_ + 1) * hidden_ * static_cast<std::int64_t>(sizeof(float));
}

void write_random_weights(const std::string& path, const ModelShape& shape, std::uint64_t seed) {
  shape.validate();
  const std::string temporary = path + ".partial";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) fail("weights = '{}': cannot be written", path);
    Header header;
    header.sizes = sizes_of(shape);
    header.seed = seed;
    const auto bytes = encode(header);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    const WeightsLayout layout(shape);
    std::vector<float> values;
    auto write = [&](int layer, WeightTensor t) {
      values.resize(static_cast<std::size_t>(layout.rows(t)) * static_cast<std::size_t>(shape.hidden));
      fill_tensor(values, t, shape, layer, seed);
      out.write(reinterpret_cast<const char*>(values.data()),
                static_cast<std::streamsize>(values.size() * sizeof(float)));
    };
    for (int l = 0; l < shape.layers; ++l) {
      for (int t = 0; t < static_cast<int>(WeightTensor::kCount); ++t) write(l, static_cast<WeightTensor>(t));
    }
    write(shape.layers, WeightTensor::kAttnNorm);  // the final norm
    out.flush();
    if (!out) {
      std::remove(temporary.c_str());
      fail("weights = '{}': cannot be written (disk full?)", path);
    }
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error) fail("weights = '{}': cannot be written: {}", path, error.message());
}

WeightsFile::WeightsFile(const std::string& path, const ModelShape& shape) : path_(path), layout_(shape) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) fail("weights = '{}': cannot be read: {}", path, std::strerror(errno));
  try {
    std::array<char, WeightsLayout::kHeaderBytes> bytes{};
    const auto got = ::pread(fd_, bytes.data(), bytes.size(), 0);
    if (got != static_cast<ssize_t>(bytes.size())) {
      fail("{}: header: {} bytes, a weights file starts with {}", path, got < 0 ? 0 : got, bytes.size());
    }
    if (std::memcmp(bytes.data(), kMagic, 8) != 0) fail("{}: header.magic: not a Fulcrum weights file", path);
    Header h;
    std::memcpy(&h.version, bytes.data() + 8, 4);
    std::memcpy(&h.dtype, bytes.data() + 12, 4);
    std::memcpy(h.sizes.data(), bytes.data() + 16, 24);
    std::memcpy(&h.seed, bytes.data() + 40, 8);
    if (h.version != kVersion) fail("{}: header.version = {}: must be {}", path, h.version, kVersion);
    if (h.dtype != 0) fail("{}: header.dtype = {}: must be 0 (fp32)", path, h.dtype);
    const auto want = sizes_of(shape);
    for (std::size_t i = 0; i < want.size(); ++i) {
      if (h.sizes[i] != want[i]) {
        fail("{}: header.{} = {}: the model '{}' has {} (a weights file of another model)", path, kSizeNames[i],
             h.sizes[i], shape.name, want[i]);
      }
    }
    seed_ = h.seed;
    const auto size = static_cast<std::int64_t>(::lseek(fd_, 0, SEEK_END));
    if (size != layout_.file_bytes()) {
      fail("{}: size = {} bytes: the header's model needs {} (truncated or padded)", path, size, layout_.file_bytes());
    }
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

WeightsFile::~WeightsFile() {
  if (fd_ >= 0) ::close(fd_);
}

void WeightsFile::read_rows(int layer, WeightTensor tensor, std::int64_t row, std::int64_t count, float* out) const {
  FULCRUM_CHECK(row >= 0 && count >= 0 && row + count <= layout_.rows(tensor), "rows [{}, {}) of {} ({} rows)", row,
                row + count, to_string(tensor), layout_.rows(tensor));
  auto* dst = reinterpret_cast<char*>(out);
  auto left = static_cast<std::size_t>(count) * static_cast<std::size_t>(layout_.hidden()) * sizeof(float);
  auto offset = static_cast<off_t>(layout_.offset_bytes(layer, tensor, row));
  while (left > 0) {
    const ssize_t got = ::pread(fd_, dst, left, offset);
    if (got <= 0) {
      if (got < 0 && errno == EINTR) continue;
      fail_runtime("{}: reading layer {} {} failed: {}", path_, layer, to_string(tensor),
                   got < 0 ? std::strerror(errno) : "unexpected end of file");
    }
    dst += got;
    left -= static_cast<std::size_t>(got);
    offset += got;
  }
}

}  // namespace fulcrum::prefill
