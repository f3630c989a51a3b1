// `fulcrum --version`: what a bug report needs to name the build.
#include "commands.hpp"

#include "fulcrum/core/simd_path.hpp"

#include "build_info.hpp"  // FULCRUM_GIT_REVISION (generated at build time: build_info.cmake)

#include <fmt/format.h>

namespace fulcrum::cli {

std::string version_text() {
#if defined(__clang__)
  const char* compiler = "Clang " __clang_version__;
#else
  const char* compiler = "GCC " __VERSION__;
#endif
  return fmt::format("fulcrum {} (git {}, {} build, {}); kernels: {}", FULCRUM_VERSION, FULCRUM_GIT_REVISION,
                     FULCRUM_BUILD_TYPE, compiler, simd::simd_path());
}

}  // namespace fulcrum::cli
