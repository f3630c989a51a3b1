// The binary plan format. Each type has one `schema` function, templated on the archive, that lists its
// fields once; BinaryWriter appends them and BinaryReader reads them back with bounds and range checks.
// Adding a field to one direction therefore adds it to the other.
#include "fulcrum/plan/serialize.hpp"

#include "fulcrum/core/error.hpp"

#include <concepts>
#include <cstring>
#include <limits>
#include <string_view>
#include <type_traits>
#include <utility>

namespace fulcrum {
namespace {

constexpr std::string_view kMagic = "FCPL";

/// The offset of the first byte of `text` that is not part of a well-formed UTF-8 sequence (RFC 3629:
/// no overlong forms, no surrogates, nothing above U+10FFFF), or text.size() when it all is.
std::size_t invalid_utf8_at(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
    const unsigned char c = byte(i);
    std::size_t extra = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
    if (c < 0x80) {
      ++i;
      continue;
    }
    if (c >= 0xC2 && c <= 0xDF) {
      extra = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
      extra = 2;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      extra = 3;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return i;
    }
    if (text.size() - i <= extra || byte(i + 1) < lo || byte(i + 1) > hi) return i;
    for (std::size_t k = 2; k <= extra; ++k) {
      if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return i;
    }
    i += extra + 1;
  }
  return text.size();
}

/// Matches T and const T, so one schema function serves the writer (const data) and the reader.
template <class T, class U>
concept Is = std::same_as<std::remove_const_t<T>, U>;

class BinaryWriter {
 public:
  static constexpr bool kReading = false;

  template <std::integral T>
  void integer(const T& value, const char* /*what*/) {
    // Through the unsigned type so that shifting is defined for negative values too.
    const auto bits = static_cast<std::make_unsigned_t<T>>(value);
    for (std::size_t i = 0; i < sizeof(T); ++i) bytes_.push_back(static_cast<std::uint8_t>(bits >> (8 * i)));
  }
  void boolean(const bool& value, const char* what) { integer(static_cast<std::uint8_t>(value ? 1 : 0), what); }
  template <class E>
  void enumeration(const E& value, E /*last*/, const char* what) {
    integer(static_cast<std::uint8_t>(value), what);
  }
  void string(const std::string& text, const char* what) {
    count(text.size(), what);
    bytes_.insert(bytes_.end(), text.begin(), text.end());
  }
  void mask(const MaskSpec& mask, const char* what) { string(mask.to_string(), what); }
  template <class Vec, class F>
  void sequence(const Vec& items, const char* what, F&& each) {
    count(items.size(), what);
    for (const auto& item : items) each(item);
  }
  void raw(std::string_view text) { bytes_.insert(bytes_.end(), text.begin(), text.end()); }
  void enter(const char* /*name*/) {}
  void leave(const char* /*name*/) {}

  std::vector<std::uint8_t> take() { return std::move(bytes_); }

 private:
  void count(std::size_t n, const char* what) {
    FULCRUM_CHECK(n <= std::numeric_limits<std::uint32_t>::max(), "plan binary: {} has {} entries, over u32", what, n);
    integer(static_cast<std::uint32_t>(n), what);
  }
  std::vector<std::uint8_t> bytes_;
};

class BinaryReader {
 public:
  static constexpr bool kReading = true;

  explicit BinaryReader(std::span<const std::uint8_t> bytes) : bytes_(bytes) {}

  template <std::integral T>
  void integer(T& value, const char* what) {
    need(sizeof(T), what);
    using Bits = std::make_unsigned_t<T>;
    Bits bits = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i) bits = static_cast<Bits>(bits | (Bits{bytes_[at_ + i]} << (8 * i)));
    at_ += sizeof(T);
    value = static_cast<T>(bits);  // two's complement, as written
  }
  void boolean(bool& value, const char* what) {
    std::uint8_t byte = 0;
    integer(byte, what);
    if (byte > 1) bad_value(what, byte, "must be 0 or 1");
    value = byte == 1;
  }
  template <class E>
  void enumeration(E& value, E last, const char* what) {
    std::uint8_t byte = 0;
    integer(byte, what);
    if (byte > static_cast<std::uint8_t>(last)) {
      bad_value(what, byte, fmt::format("must be in [0, {}]", static_cast<int>(last)));
    }
    value = static_cast<E>(byte);
  }
  void string(std::string& text, const char* what) {
    const std::size_t n = count(what);
    text.assign(reinterpret_cast<const char*>(bytes_.data() + at_), n);
    // Names reach Python as str and JSON as strings, both UTF-8 only: a corrupt byte is caught here,
    // not as a UnicodeDecodeError or a JSON type error far from the file.
    if (const std::size_t bad = invalid_utf8_at(text); bad != text.size()) {
      fail("plan binary: {} at byte {}: not UTF-8 (byte {} of the string)", path(what), at_, bad);
    }
    at_ += n;
  }
  void mask(MaskSpec& mask, const char* what) {
    const std::size_t start = at_;
    std::string text;
    string(text, what);
    try {
      mask = MaskSpec::parse(text);
    } catch (const Error& e) {
      fail("plan binary: {} = '{}' at byte {}: {}", path(what), text, start, e.what());
    }
  }
  template <class Vec, class F>
  void sequence(Vec& items, const char* what, F&& each) {
    const std::size_t n = count(what);
    // Grown element by element, never resized to the count: an entry is many times larger in memory
    // than its smallest encoding, so a corrupt count that still fits the remaining bytes would otherwise
    // allocate far more than the input holds before the reader notices the truncation. Each element
    // read consumes bytes, so memory stays proportional to the input.
    items.clear();
    // The path stack is only formatted on error, so tracking it costs a push and a pop per list.
    path_.emplace_back(what, 0);
    for (std::size_t i = 0; i < n; ++i) {
      each(items.emplace_back());
      ++path_.back().second;
    }
    path_.pop_back();
  }
  /// Names a nested struct in error paths ("src" in "...instructions[6].src.row").
  /// A null name (a list's element) adds nothing.
  void enter(const char* name) {
    if (name != nullptr) path_.emplace_back(name, kNoIndex);
  }
  void leave(const char* name) {
    if (name != nullptr) path_.pop_back();
  }
  void raw(std::string_view expected) {
    need(expected.size(), "magic");
    const std::string_view got(reinterpret_cast<const char*>(bytes_.data()), expected.size());
    if (got != expected) {
      std::string shown;  // the file's bytes, printable ones as they are
      for (const char c : got) {
        shown += c >= ' ' && c <= '~' ? std::string(1, c) : fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
      }
      fail("plan binary: bad magic '{}' at byte 0: expected '{}' (not a Fulcrum plan)", shown, expected);
    }
    at_ += expected.size();
  }
  void finish() const {
    if (at_ != bytes_.size()) {
      fail("plan binary: {} trailing bytes after the plan at byte {}", bytes_.size() - at_, at_);
    }
  }

  /// "plan.programs[2].instructions[5].stream": where the reader is, for error messages.
  std::string path(const char* what) const {
    std::string out = "plan";
    for (const auto& [name, index] : path_) {
      out += index == kNoIndex ? fmt::format(".{}", name) : fmt::format(".{}[{}]", name, index);
    }
    return out + "." + what;
  }
  [[noreturn]] void bad_value(const char* what, std::uint64_t value, std::string_view rule) const {
    fail("plan binary: {} = {} at byte {}: {}", path(what), value, at_ - 1, rule);
  }

 private:
  void need(std::size_t n, const char* what, std::string_view unit = "bytes") const {
    if (bytes_.size() - at_ < n) {
      fail("plan binary: truncated at byte {} while reading {} ({} {}, {} bytes left)", at_, path(what), n, unit,
           bytes_.size() - at_);
    }
  }
  std::size_t count(const char* what) {
    std::uint32_t n = 0;
    integer(n, what);
    // Every entry takes at least one byte, so a count beyond the remaining bytes is truncation; checking
    // it here keeps a corrupt count from allocating gigabytes before the reader notices.
    need(n, what, "entries");
    return n;
  }

  static constexpr std::size_t kNoIndex = std::numeric_limits<std::size_t>::max();

  std::span<const std::uint8_t> bytes_;
  std::size_t at_ = 0;
  std::vector<std::pair<const char*, std::size_t>> path_;
};

// ---- The schema: each type's fields, in declaration order, once for both directions. ----

// Slices and row spans are members of several structs; `name` says which one in error paths (null
// for a list element, which the list already names).
template <class Ar>
void schema(Ar& ar, Is<Slice> auto& s, const char* name) {
  ar.enter(name);
  ar.integer(s.buffer, "buffer");
  ar.integer(s.row, "row");
  ar.integer(s.rows, "rows");
  ar.integer(s.heads.begin, "heads begin");
  ar.integer(s.heads.end, "heads end");
  ar.leave(name);
}

template <class Ar>
void schema(Ar& ar, Is<RowSpan> auto& s, const char* name) {
  ar.enter(name);
  ar.integer(s.row, "row");
  ar.integer(s.position, "position");
  ar.integer(s.count, "count");
  ar.leave(name);
}

template <class Ar>
void schema(Ar& ar, Is<Message> auto& m) {
  ar.integer(m.peer, "peer");
  ar.integer(m.tag, "tag");
  schema(ar, m.slice, "slice");
}

template <class Ar>
void schema(Ar& ar, Is<AttentionItem> auto& item) {
  ar.integer(item.doc, "doc");
  schema(ar, item.queries[0], "queries[0]");
  schema(ar, item.queries[1], "queries[1]");
  schema(ar, item.keys, "keys");
  ar.integer(item.heads.begin, "heads begin");
  ar.integer(item.heads.end, "heads end");
}

template <class Ar>
void schema(Ar& ar, Is<CommLaunch> auto& op) {
  ar.integer(op.id, "id");
  ar.sequence(op.sends, "sends", [&](auto& m) { schema(ar, m); });
  ar.sequence(op.receives, "receives", [&](auto& m) { schema(ar, m); });
  ar.enumeration(op.kind, CommKind::kReturn, "kind");
}

template <class Ar>
void schema(Ar& ar, Is<CommWait> auto& op) {
  ar.integer(op.launch, "launch");
}

template <class Ar>
void schema(Ar& ar, Is<Attention> auto& op) {
  ar.integer(op.q, "q");
  ar.integer(op.k, "k");
  ar.integer(op.v, "v");
  ar.integer(op.o, "o");
  ar.integer(op.lse, "lse");
  ar.sequence(op.items, "items", [&](auto& item) { schema(ar, item); });
}

template <class Ar>
void schema(Ar& ar, Is<AttentionBackward> auto& op) {
  ar.integer(op.q, "q");
  ar.integer(op.k, "k");
  ar.integer(op.v, "v");
  ar.integer(op.o, "o");
  ar.integer(op.lse, "lse");
  ar.integer(op.d_o, "d_o");
  ar.integer(op.dq, "dq");
  ar.integer(op.dk, "dk");
  ar.integer(op.dv, "dv");
  ar.sequence(op.items, "items", [&](auto& item) { schema(ar, item); });
}

template <class Ar>
void schema(Ar& ar, Is<Reduce> auto& op) {
  ar.enumeration(op.op, ReduceOp::kSum, "reduce op");
  schema(ar, op.out, "out");
  schema(ar, op.out_lse, "out_lse");
  ar.sequence(op.parts, "parts", [&](auto& s) { schema(ar, s, nullptr); });
  ar.sequence(op.part_lse, "part_lse", [&](auto& s) { schema(ar, s, nullptr); });
}

template <class Ar>
void schema(Ar& ar, Is<Copy> auto& op) {
  schema(ar, op.src, "src");
  schema(ar, op.dst, "dst");
}

/// An Operation holding the default value of alternative `index` (< variant_size).
template <std::size_t... I>
Operation default_operation(std::size_t index, std::index_sequence<I...>) {
  Operation result;
  ((index == I ? (void)result.template emplace<I>() : void()), ...);
  return result;
}

template <class Ar>
void schema(Ar& ar, Is<Instruction> auto& instruction) {
  constexpr std::size_t kAlternatives = std::variant_size_v<Operation>;
  auto tag = static_cast<std::uint8_t>(instruction.op.index());
  ar.integer(tag, "op");
  if constexpr (Ar::kReading) {
    if (tag >= kAlternatives) ar.bad_value("op", tag, fmt::format("must be in [0, {}]", kAlternatives - 1));
    instruction.op = default_operation(tag, std::make_index_sequence<kAlternatives>{});
  }
  ar.integer(instruction.stream, "stream");
  std::visit([&](auto& op) { schema(ar, op); }, instruction.op);
}

template <class Ar>
void schema(Ar& ar, Is<Buffer> auto& b) {
  ar.string(b.name, "name");
  ar.enumeration(b.field, Field::kDV, "field");
  ar.integer(b.rows, "rows");
  ar.enumeration(b.init, BufferInit::kUndefined, "init");
  ar.boolean(b.output, "output");
}

template <class Ar>
void schema(Ar& ar, Is<OwnedRows> auto& rows) {
  ar.integer(rows.doc, "doc");
  ar.integer(rows.tokens.begin, "tokens begin");
  ar.integer(rows.tokens.end, "tokens end");
  ar.integer(rows.row, "row");
}

template <class Ar>
void schema(Ar& ar, Is<Program> auto& program) {
  ar.integer(program.rank, "rank");
  ar.sequence(program.owned, "owned", [&](auto& rows) { schema(ar, rows); });
  ar.sequence(program.buffers, "buffers", [&](auto& b) { schema(ar, b); });
  ar.sequence(program.instructions, "instructions", [&](auto& i) { schema(ar, i); });
}

template <class Ar>
void schema(Ar& ar, Is<Plan> auto& plan) {
  ar.enumeration(plan.pass, Pass::kBackward, "pass");
  ar.string(plan.planner, "planner");
  ar.enumeration(plan.mode, CommMode::kSignal, "mode");
  ar.integer(plan.nano_batches, "nano_batches");
  ar.integer(plan.heads.q_heads, "heads.q_heads");
  ar.integer(plan.heads.kv_heads, "heads.kv_heads");
  ar.integer(plan.heads.head_dim, "heads.head_dim");
  ar.integer(plan.heads.dtype_bytes, "heads.dtype_bytes");
  ar.sequence(plan.documents, "documents", [&](auto& doc) {
    ar.integer(doc.length, "length");
    ar.mask(doc.mask, "mask");
    ar.sequence(doc.head_masks, "head_masks", [&](auto& m) { ar.mask(m, "mask"); });
  });
  ar.sequence(plan.programs, "programs", [&](auto& program) { schema(ar, program); });
}

}  // namespace

std::vector<std::uint8_t> to_binary(const Plan& plan) {
  BinaryWriter writer;
  writer.raw(kMagic);
  writer.integer(static_cast<std::uint32_t>(kPlanFormatVersion), "version");
  schema(writer, plan);
  return writer.take();
}

Plan plan_from_binary(std::span<const std::uint8_t> bytes) {
  BinaryReader reader(bytes);
  reader.raw(kMagic);
  std::uint32_t version = 0;
  reader.integer(version, "version");
  if (version != static_cast<std::uint32_t>(kPlanFormatVersion)) {
    fail("plan binary: version = {} at byte 4: this build reads version {}", version, kPlanFormatVersion);
  }
  Plan plan;
  schema(reader, plan);
  reader.finish();
  return plan;
}

}  // namespace fulcrum
