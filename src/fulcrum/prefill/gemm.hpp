// The prefill's matrix products, through OpenBLAS (cblas_sgemm): row-major fp32, C = A·B or C = A·Bᵀ,
// with leading dimensions so that a GEMM can read or write a column block of a wider matrix (one KV
// group's heads inside a rank's Q). cblas.h stays inside gemm.cpp.
#pragma once

namespace fulcrum::prefill {

/// C[m][n] = A[m][k] · op(B) + beta · C, where op(B) is B[k][n] (transpose_b false) or B[n][k]ᵀ (true).
/// lda, ldb, ldc: row strides in floats.
void gemm(bool transpose_b, int m, int n, int k, const float* a, int lda, const float* b, int ldb, float* c, int ldc,
          float beta);

/// OpenBLAS's own thread count, process-wide. Call from one thread only (it is a global setting): once per
/// MPI process, or once (1) before thread ranks start.
void set_blas_threads(int threads);

}  // namespace fulcrum::prefill
