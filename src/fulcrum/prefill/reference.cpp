#include "fulcrum/prefill/reference.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/kernels/reference.hpp"
#include "fulcrum/prefill/weights_file.hpp"

#include <algorithm>
#include <cmath>

namespace fulcrum::prefill {
namespace {

using Matrix = std::vector<double>;  // row-major

std::size_t sz(long v) { return static_cast<std::size_t>(v); }

Matrix read_tensor(const WeightsFile& file, int layer, WeightTensor t) {
  const auto rows = file.layout().rows(t);
  std::vector<float> values(sz(rows) * sz(file.layout().hidden()));
  file.read_rows(layer, t, 0, rows, values.data());
  return {values.begin(), values.end()};
}

// y[t][o] = sum_i x[t][i] · w[o][i]: x [rows][in], w [out][in].
Matrix times_transposed(const Matrix& x, const Matrix& w, long in) {
  const long rows = static_cast<long>(x.size()) / in, out = static_cast<long>(w.size()) / in;
  Matrix y(sz(rows * out));
  for (long t = 0; t < rows; ++t) {
    for (long o = 0; o < out; ++o) {
      double sum = 0;
      for (long i = 0; i < in; ++i) sum += x[sz(t * in + i)] * w[sz(o * in + i)];
      y[sz(t * out + o)] = sum;
    }
  }
  return y;
}

// y[t][o] = sum_i x[t][i] · w[i][o]: x [rows][in], w [in][out].
Matrix times(const Matrix& x, const Matrix& w, long in) {
  const long rows = static_cast<long>(x.size()) / in, out = static_cast<long>(w.size()) / in;
  Matrix y(sz(rows * out), 0.0);
  for (long t = 0; t < rows; ++t) {
    for (long i = 0; i < in; ++i) {
      const double a = x[sz(t * in + i)];
      for (long o = 0; o < out; ++o) y[sz(t * out + o)] += a * w[sz(i * out + o)];
    }
  }
  return y;
}

Matrix rms_norm(const Matrix& x, const Matrix& gain, double eps) {
  const auto hidden = gain.size();
  Matrix y(x.size());
  for (std::size_t r = 0; r < x.size(); r += hidden) {
    double sum = 0;
    for (std::size_t i = 0; i < hidden; ++i) sum += x[r + i] * x[r + i];
    const double scale = 1 / std::sqrt(sum / static_cast<double>(hidden) + eps);
    for (std::size_t i = 0; i < hidden; ++i) y[r + i] = x[r + i] * scale * gain[i];
  }
  return y;
}

// Hugging Face Llama's rotary embedding: rotate_half pairs (i, i + d/2) by position · theta^(-2i/d).
void rope(Matrix& x, long heads, long d, double theta) {
  const long half = d / 2, rows = static_cast<long>(x.size()) / (heads * d);
  for (long t = 0; t < rows; ++t) {
    for (long h = 0; h < heads; ++h) {
      double* v = x.data() + (t * heads + h) * d;
      for (long i = 0; i < half; ++i) {
        const double angle =
            static_cast<double>(t) * std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(d));
        const double a = v[i], b = v[i + half];
        v[i] = a * std::cos(angle) - b * std::sin(angle);
        v[i + half] = b * std::cos(angle) + a * std::sin(angle);
      }
    }
  }
}

}  // namespace

std::vector<double> reference_prefill(const PrefillSpec& spec, const std::string& weights_path) {
  const ModelShape& s = spec.shape;
  const WeightsFile file(weights_path, s);
  const long hidden = s.hidden, d = s.head_dim;
  const auto prompt = prompt_hidden_states(s, spec.tokens, spec.seed);
  Matrix x(prompt.begin(), prompt.end());
  for (int l = 0; l < s.layers; ++l) {
    const Matrix h = rms_norm(x, read_tensor(file, l, WeightTensor::kAttnNorm), s.rms_norm_eps);
    Matrix q = times_transposed(h, read_tensor(file, l, WeightTensor::kWq), hidden);
    Matrix k = times_transposed(h, read_tensor(file, l, WeightTensor::kWk), hidden);
    const Matrix v = times_transposed(h, read_tensor(file, l, WeightTensor::kWv), hidden);
    rope(q, s.q_heads, d, s.rope_theta);
    rope(k, s.kv_heads, d, s.rope_theta);

    kernels::AttentionTask task;  // every head of the prompt, each with its own mask
    task.queries[0] = RowSpan{0, 0, spec.tokens};
    task.keys = RowSpan{0, 0, spec.tokens};
    task.doc_len = spec.tokens;
    task.head_masks = spec.head_masks[static_cast<std::size_t>(l)];
    kernels::AttentionShape shape;
    shape.q_heads = s.q_heads;
    shape.kv_heads = s.kv_heads;
    shape.head_dim = s.head_dim;
    const auto attention = kernels::reference_attention({&task, 1}, shape, q, k, v, {});
    const Matrix o = times(attention.o, read_tensor(file, l, WeightTensor::kWo), long{s.q_heads} * d);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += o[i];

    const Matrix h2 = rms_norm(x, read_tensor(file, l, WeightTensor::kMlpNorm), s.rms_norm_eps);
    Matrix gate = times_transposed(h2, read_tensor(file, l, WeightTensor::kWgate), hidden);
    const Matrix up = times_transposed(h2, read_tensor(file, l, WeightTensor::kWup), hidden);
    for (std::size_t i = 0; i < gate.size(); ++i) gate[i] = gate[i] / (1 + std::exp(-gate[i])) * up[i];
    const Matrix down = times(gate, read_tensor(file, l, WeightTensor::kWdown), s.ffn_hidden);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += down[i];
  }
  return rms_norm(x, read_tensor(file, s.layers, WeightTensor::kAttnNorm), s.rms_norm_eps);
}

double max_relative_error(const std::vector<float>& got, const std::vector<double>& want) {
  FULCRUM_CHECK(got.size() == want.size(), "compare {} values with {}", got.size(), want.size());
  double error = 0, scale = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    error = std::max(error, std::abs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return scale > 0 ? error / scale : error;
}

}  // namespace fulcrum::prefill
