# Turns a data file into a C++ source that defines `std::string_view <SYMBOL>()` with its bytes, so the
# library never reads files at run time. Invoked with -DINPUT= -DOUTPUT= -DSYMBOL=.
file(READ "${INPUT}" content HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," bytes "${content}")
file(WRITE "${OUTPUT}" "// Generated from ${INPUT} by data/embed.cmake; do not edit.\n#include <string_view>\nnamespace fulcrum::data {\nstatic const char k${SYMBOL}[] = {${bytes} 0};\nstd::string_view ${SYMBOL}() { return {k${SYMBOL}, sizeof(k${SYMBOL}) - 1}; }\n}  // namespace fulcrum::data\n")
