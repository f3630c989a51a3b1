// Whether this build is instrumented by AddressSanitizer or ThreadSanitizer, for the tests that check a
// property over many random cases: under a sanitizer each case costs several times more (the ASan build's
// thousand-batch planner test took 368 s of CI's 2 cores, against 59 s in the dev build), so those run a
// fifth of their cases there. The dev build runs them all; the sanitizers are there to catch memory and
// thread errors, which the smaller sample still exercises on every code path.
#pragma once

namespace fulcrum {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)  // GCC
inline constexpr bool kSanitizerBuild = true;
#elif defined(__has_feature)  // Clang
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kSanitizerBuild = true;
#else
inline constexpr bool kSanitizerBuild = false;
#endif
#else
inline constexpr bool kSanitizerBuild = false;
#endif

/// How many of `cases` random cases a test runs in this build: all of them, or a fifth under a sanitizer.
constexpr int random_cases(int cases) { return kSanitizerBuild ? (cases + 4) / 5 : cases; }

}  // namespace fulcrum
