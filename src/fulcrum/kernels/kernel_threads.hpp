// The kernels' thread count (OpenMP's, of the calling thread) for a scope only: a job or a rank's run
// sets its own, and the caller's setting is restored when the scope ends, however it ends.
#pragma once

#include <omp.h>

namespace fulcrum::kernels {

class ScopedKernelThreads {
 public:
  explicit ScopedKernelThreads(int threads) : previous_(omp_get_max_threads()) { omp_set_num_threads(threads); }
  ~ScopedKernelThreads() { omp_set_num_threads(previous_); }
  ScopedKernelThreads(const ScopedKernelThreads&) = delete;
  ScopedKernelThreads& operator=(const ScopedKernelThreads&) = delete;

 private:
  int previous_;
};

}  // namespace fulcrum::kernels
