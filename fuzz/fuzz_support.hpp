// What the harnesses share: how a finding is reported, and what counts as an expected refusal.
#pragma once

#include "fulcrum/core/error.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>

/// A property every input must keep; a violation aborts, which libFuzzer reports with the input.
#define FUZZ_CHECK(condition, ...)                                                        \
  do {                                                                                    \
    if (!(condition)) {                                                                   \
      std::fprintf(stderr, "fuzz: %s:%d: %s fails: %s\n", __FILE__, __LINE__, #condition, \
                   fmt::format(__VA_ARGS__).c_str());                                     \
      std::abort();                                                                       \
    }                                                                                     \
  } while (false)

namespace fulcrum::fuzz {

/// Fulcrum refuses bad input with a bad-input Error naming the field (one line); an internal or runtime
/// Error, or any other exception, escaping a reader is a finding. Returns libFuzzer's "keep going".
inline int refused(const Error& e) {
  FUZZ_CHECK(e.kind() == ErrorKind::kBadInput, "a {} error where bad input was expected: {}", to_string(e.kind()),
             e.what());
  return 0;
}

}  // namespace fulcrum::fuzz
