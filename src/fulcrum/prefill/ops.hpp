// The prefill's element-wise steps in fp32 (the GEMMs are gemm.hpp, attention the fused kernels):
// Llama's RMSNorm, rotary position embedding, and the SwiGLU gate.
#pragma once

#include <span>

namespace fulcrum::prefill {

/// out[t] = x[t] / sqrt(mean(x[t]²) + eps) · gain, for every row t of `hidden` values (accumulated in fp64).
void rms_norm(std::span<const float> x, std::span<const float> gain, double eps, std::span<float> out);

/// Rotary embedding in place, Hugging Face Llama's convention (rotate_half): in each head of each row t
/// (token position t), the pair (x[i], x[i + d/2]) turns by the angle t · theta^(-2i/d). `heads` heads of
/// `head_dim` (even) values per row.
void apply_rope(std::span<float> x, int heads, int head_dim, double theta);

/// gate[i] = silu(gate[i]) · up[i], silu(g) = g / (1 + e^-g).
void swiglu(std::span<float> gate, std::span<const float> up);

}  // namespace fulcrum::prefill
