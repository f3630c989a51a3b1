// CPIP (FlexAttn's cross-prefetch inference pipeline) on the CPU: a layer's weights are read from the
// weights file by a background thread while the previous part computes. Parts are numbered in compute
// order (2l: layer l's attention, 2l + 1: its MLP); two part buffers alternate, so at most one layer's
// weights are resident and the reader runs one part ahead: during layer l's attention it reads layer l's
// MLP, during layer l's MLP (and the all-reduce before it) layer l + 1's attention.
//
// Without CPIP (background = false) acquire() reads the part itself, synchronously, into the same buffers.
// A failed read is rethrown by acquire() on the compute thread (the rank then fails with the reader's
// message); destruction stops and joins the reader whatever state it is in, so no error path hangs.
#pragma once

#include "fulcrum/prefill/layer_weights.hpp"

#include <array>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace fulcrum::prefill {

class WeightStream {
 public:
  /// Fills a part's buffer (reusing its memory). Called on the reader thread with background = true.
  using Loader = std::function<void(int part, WeightPart& into)>;

  WeightStream(int parts, Loader loader, bool background);
  ~WeightStream();
  WeightStream(const WeightStream&) = delete;
  WeightStream& operator=(const WeightStream&) = delete;

  /// Part `part` (parts are acquired in order 0, 1, ...; at most two held): waits for the reader, or reads
  /// it now without CPIP. `waited_s` receives the seconds the caller was blocked (without CPIP: the read).
  const WeightPart& acquire(int part, double& waited_s);
  /// Gives the part's buffer back to the reader. Parts are released in order.
  void release(int part);

 private:
  static constexpr int kSlots = 2;
  void reader_loop();

  int parts_;
  Loader loader_;
  bool background_;
  std::array<WeightPart, kSlots> slots_;
  std::array<int, kSlots> ready_{-1, -1};  // the part each slot holds, -1 when empty
  int next_acquire_ = 0;
  int released_ = 0;  // parts released so far (they are released in order)

  std::mutex mutex_;
  std::condition_variable changed_;
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread reader_;
};

}  // namespace fulcrum::prefill
