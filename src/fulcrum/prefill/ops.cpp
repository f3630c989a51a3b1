#include "fulcrum/prefill/ops.hpp"

#include "fulcrum/core/error.hpp"

#include <cmath>
#include <vector>

namespace fulcrum::prefill {

void rms_norm(std::span<const float> x, std::span<const float> gain, double eps, std::span<float> out) {
  const std::size_t hidden = gain.size();
  FULCRUM_CHECK(hidden > 0 && x.size() % hidden == 0 && out.size() == x.size(), "rms_norm sizes {} {} {}", x.size(),
                hidden, out.size());
  for (std::size_t row = 0; row < x.size(); row += hidden) {
    double sum = 0;
    for (std::size_t i = 0; i < hidden; ++i) sum += static_cast<double>(x[row + i]) * x[row + i];
    const auto scale = static_cast<float>(1.0 / std::sqrt(sum / static_cast<double>(hidden) + eps));
    for (std::size_t i = 0; i < hidden; ++i) out[row + i] = x[row + i] * scale * gain[i];
  }
}

void apply_rope(std::span<float> x, int heads, int head_dim, double theta) {
  FULCRUM_CHECK(head_dim % 2 == 0 && heads >= 0, "rope over {} heads of {}", heads, head_dim);
  const auto row_size = static_cast<std::size_t>(heads) * static_cast<std::size_t>(head_dim);
  if (row_size == 0) return;
  const int half = head_dim / 2;
  std::vector<double> inverse_frequency(static_cast<std::size_t>(half));
  for (int i = 0; i < half; ++i) inverse_frequency[static_cast<std::size_t>(i)] = std::pow(theta, -2.0 * i / head_dim);
  std::vector<float> cosines(static_cast<std::size_t>(half)), sines(static_cast<std::size_t>(half));
  for (std::size_t row = 0; row * row_size < x.size(); ++row) {
    for (int i = 0; i < half; ++i) {
      const double angle = static_cast<double>(row) * inverse_frequency[static_cast<std::size_t>(i)];
      cosines[static_cast<std::size_t>(i)] = static_cast<float>(std::cos(angle));
      sines[static_cast<std::size_t>(i)] = static_cast<float>(std::sin(angle));
    }
    for (int h = 0; h < heads; ++h) {
      float* v = x.data() + row * row_size + static_cast<std::size_t>(h) * static_cast<std::size_t>(head_dim);
      for (int i = 0; i < half; ++i) {
        const float a = v[i], b = v[i + half];
        const float c = cosines[static_cast<std::size_t>(i)], s = sines[static_cast<std::size_t>(i)];
        v[i] = a * c - b * s;
        v[i + half] = b * c + a * s;
      }
    }
  }
}

void swiglu(std::span<float> gate, std::span<const float> up) {
  FULCRUM_CHECK(gate.size() == up.size(), "swiglu sizes {} {}", gate.size(), up.size());
  for (std::size_t i = 0; i < gate.size(); ++i) gate[i] = gate[i] / (1.0F + std::exp(-gate[i])) * up[i];
}

}  // namespace fulcrum::prefill
