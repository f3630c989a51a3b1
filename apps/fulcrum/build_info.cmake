# Run at every build (cmake -P, from apps/fulcrum/CMakeLists.txt): writes OUTPUT, a header with the source
# tree's git revision, rewriting it only when the revision changed, so `fulcrum --version` names the
# revision it was built from and an unchanged tree recompiles nothing.
cmake_minimum_required(VERSION 3.25)  # script mode starts with old policies; take the project's
execute_process(COMMAND git -C "${SOURCE_DIR}" describe --always --dirty --abbrev=12
                OUTPUT_VARIABLE revision OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE status)
if(NOT status EQUAL 0 OR revision STREQUAL "")
  set(revision "unknown")  # not a git checkout (a source archive)
endif()
file(CONFIGURE OUTPUT "${OUTPUT}" CONTENT "#pragma once\n#define FULCRUM_GIT_REVISION \"@revision@\"\n" @ONLY)
