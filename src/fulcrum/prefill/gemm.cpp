#include "fulcrum/prefill/gemm.hpp"

#include "fulcrum/core/error.hpp"

#include <cblas.h>

namespace fulcrum::prefill {

void gemm(bool transpose_b, int m, int n, int k, const float* a, int lda, const float* b, int ldb, float* c, int ldc,
          float beta) {
  FULCRUM_CHECK(m >= 0 && n >= 0 && k >= 0, "gemm shape {} x {} x {}", m, n, k);
  if (m == 0 || n == 0) return;
  if (k == 0) {  // BLAS would scale C by beta; an empty product adds nothing
    if (beta != 1.0F) {
      for (int i = 0; i < m; ++i) {
        for (int j = 0; j < n; ++j) c[static_cast<long>(i) * ldc + j] *= beta;
      }
    }
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, transpose_b ? CblasTrans : CblasNoTrans, m, n, k, 1.0F, a, lda, b, ldb, beta,
              c, ldc);
}

void set_blas_threads(int threads) {
  FULCRUM_CHECK(threads >= 1, "blas threads {}", threads);
  openblas_set_num_threads(threads);
}

}  // namespace fulcrum::prefill
