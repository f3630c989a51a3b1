#include "fulcrum/prefill/weight_stream.hpp"

#include "fulcrum/core/error.hpp"

#include <chrono>

namespace fulcrum::prefill {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

WeightStream::WeightStream(int parts, Loader loader, bool background)
    : parts_(parts), loader_(std::move(loader)), background_(background) {
  FULCRUM_CHECK(parts >= 0, "{} parts", parts);
  if (background_) reader_ = std::thread([this] { reader_loop(); });
}

WeightStream::~WeightStream() {
  {
    const std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  if (reader_.joinable()) reader_.join();
}

void WeightStream::reader_loop() {
  for (int part = 0; part < parts_; ++part) {
    const int slot = part % kSlots;
    {
      // A slot is free once the part two before this one was released.
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return stop_ || part - released_ < kSlots; });
      if (stop_) return;
    }
    try {
      loader_(part, slots_[static_cast<std::size_t>(slot)]);  // the slot is ours until ready_ says otherwise
    } catch (...) {
      {
        const std::lock_guard lock(mutex_);
        error_ = std::current_exception();
      }
      changed_.notify_all();
      return;
    }
    {
      const std::lock_guard lock(mutex_);
      ready_[static_cast<std::size_t>(slot)] = part;
    }
    changed_.notify_all();
  }
}

const WeightPart& WeightStream::acquire(int part, double& waited_s) {
  FULCRUM_CHECK(part == next_acquire_ && part < parts_, "acquire part {} (next {}, of {})", part, next_acquire_,
                parts_);
  FULCRUM_CHECK(part - released_ < kSlots, "acquire part {} with {} released: more than {} held", part, released_,
                kSlots);
  const auto slot = static_cast<std::size_t>(part % kSlots);
  const auto start = std::chrono::steady_clock::now();
  ++next_acquire_;
  if (!background_) {
    loader_(part, slots_[slot]);
    ready_[slot] = part;
    waited_s = seconds_since(start);
    return slots_[slot];
  }
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return ready_[slot] == part || error_ != nullptr; });
  waited_s = seconds_since(start);
  if (ready_[slot] != part) std::rethrow_exception(error_);
  return slots_[slot];
}

void WeightStream::release(int part) {
  {
    const std::lock_guard lock(mutex_);
    FULCRUM_CHECK(part == released_ && part < next_acquire_, "release part {} (next to release {})", part, released_);
    ready_[static_cast<std::size_t>(part % kSlots)] = -1;
    ++released_;
  }
  changed_.notify_all();
}

}  // namespace fulcrum::prefill
