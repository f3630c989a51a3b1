// A `--dataset file:PATH` lengths file: one integer per line, or a JSON array. Either it is refused with a
// bad-input Error, or every length is in [1, kMaxDocumentTokens] and a line file gives one length per
// non-blank line.
#include "fuzz_support.hpp"

#include "fulcrum/workload/length_source.hpp"
#include "fulcrum/workload/limits.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace fulcrum;
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<Tokens> lengths;
  try {
    lengths = parse_lengths(text, "fuzz.txt");
  } catch (const Error& e) {
    return fuzz::refused(e);
  }
  FUZZ_CHECK(!lengths.empty(), "no lengths and no error");
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    FUZZ_CHECK(lengths[i] >= 1 && lengths[i] <= kMaxDocumentTokens, "length #{} = {}", i, lengths[i]);
  }
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] != '[') {
    std::size_t lines = 0;
    std::size_t start = 0;
    while (start <= text.size()) {
      const std::size_t end = std::min(text.find('\n', start), text.size());
      if (text.substr(start, end - start).find_first_not_of(" \t\r") != std::string::npos) ++lines;
      if (end == text.size()) break;
      start = end + 1;
    }
    FUZZ_CHECK(lines == lengths.size(), "{} non-blank lines gave {} lengths", lines, lengths.size());
  }
  return 0;
}
