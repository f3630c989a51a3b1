// MaskSpec: which keys each query row of a document may attend to. Planners, the cost model, the
// verifier and the kernels all ask the mask the same questions, so they can never disagree.
//
// Two families of masks:
//  - Band masks (causal, full, sliding window, lambda, causal-blockwise, shared-question) are unions of
//    constraints  k <= q + c  clipped to key ranges that are constant over stretches of rows (a block,
//    an answer). That gives closed-form pair counts over any (query range x key range) rectangle, and
//    a finite set of rows where the visible set changes shape, which is what lets plan::verify check
//    exact coverage without visiting every (q, k) pair. `visible` is exact (at most two ranges).
//  - Index-list masks (vertical-slash, block-sparse, blockified vertical-slash) keep their columns /
//    offsets / block pairs behind a shared, immutable payload. `allows`, `row_bits`, `count_pairs` and `classify` are
//    exact. For planning and coverage (`visible`, `keys_needed`, `row_breakpoints`) they answer with their *causal
//    hull*, as if the mask were causal: planners place work over the hull, and plan::verify checks that tasks tile the
//    hull exactly once, which implies every index pair is computed exactly once. Kernels then skip the hull's invisible
//    pairs through `classify` and `row_bits`.
//  - The striped mask wraps any mask for a document stored permuted in MTraining's block-striped order
//    (slot p holds original position source_position(p)). A causal row's keys are scattered over slot
//    order, so its planning hull is the full square: `visible` is [0, doc_len), `keys_needed` the keys,
//    no row breakpoints. `allows`, `row_bits`, `count_pairs` and `classify` are exact (runs of slots
//    holding consecutive original positions, asked of the inner mask). Its documents' lengths must be
//    multiples of ranks x block (`check_length`, called where documents and tasks are validated).
#pragma once

#include "fulcrum/core/interval.hpp"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fulcrum {

enum class MaskKind {
  kCausal,
  kFull,
  kSlidingWindow,
  kLambda,
  kCausalBlockwise,
  kSharedQuestion,
  kVerticalSlash,
  kBlockSparse,
  kVerticalSlashBlocks,
  kStriped,
};

/// The one table of mask kinds: each kind's name (the first field of its text form, MaskSpec::parse
/// and to_string), the syntax users write, and an example spec that parses and is valid for documents
/// of any length (small parameters, so tests on documents of a few tokens see its structure). Help
/// texts, errors, bindings and tests that need "every kind" read it, so a new kind is one new row.
struct MaskKindInfo {
  MaskKind kind;
  std::string_view name;     // "window"
  std::string_view syntax;   // "window:W"
  std::string_view example;  // "window:5"
};
/// One row per MaskKind, in declaration order.
std::span<const MaskKindInfo> mask_kind_table();
/// The row of `kind`; the name is also what Python's capabilities list.
const MaskKindInfo& mask_kind_info(MaskKind kind);
/// Every kind's syntax joined by `separator`, e.g. "causal | full | window:W | ...".
std::string mask_syntax_list(std::string_view separator);

/// Every MaskKind, in declaration order (the table's kinds).
std::vector<MaskKind> all_mask_kinds();

/// Whether a (query tile x key tile) rectangle has no visible pair, all pairs visible, or some.
enum class TileKind { kEmpty, kFull, kPartial };

struct MaskSpec;
struct MaskColumns;

/// The index lists of the index-list masks. Immutable once built and shared by every copy of a
/// MaskSpec; all lists are sorted and free of duplicates.
struct MaskIndexLists {
  std::vector<Tokens> verticals;                       // (blockified) vertical-slash: key columns later rows see
  std::vector<Tokens> slashes;                         // vertical-slash: offsets q - k >= 0
  std::vector<std::pair<Tokens, Tokens>> block_pairs;  // block-sparse: (query block, key block)
  std::vector<Tokens> block_offsets;                   // blockified vertical-slash: q / block - k / block >= 0
  friend bool operator==(const MaskIndexLists&, const MaskIndexLists&) = default;
};

struct MaskSpec {
  MaskKind kind = MaskKind::kCausal;
  Tokens window = 0;            // keys a row sees back from itself (itself included): sliding window, lambda
  Tokens sink = 0;              // leading keys every row sees: lambda
  Tokens block = 0;             // tokens per block: causal-blockwise, block-sparse, vsblocks, striped
  Tokens window_blocks = 0;     // earlier blocks a row sees besides the sink: causal-blockwise
  Tokens answers = 0;           // answers after the question: shared-question
  Tokens question_percent = 0;  // share of the document that is the question, in [1, 99]: shared-question
  int ranks = 0;                // ranks the document is striped over: striped
  std::shared_ptr<const MaskIndexLists> lists;  // index-list masks; null otherwise
  std::shared_ptr<const MaskSpec> inner;        // striped: the mask in original positions; null otherwise

  static MaskSpec causal() { return {}; }
  static MaskSpec full() {
    MaskSpec m;
    m.kind = MaskKind::kFull;
    return m;
  }
  static MaskSpec sliding_window(Tokens window);
  static MaskSpec lambda(Tokens sink, Tokens window);
  /// DCP's causal-blockwise mask: blocks of `block` tokens; a row of block j sees the first block (the
  /// sink), blocks j - window_blocks .. j up to itself; a row of the document's last block sees all of
  /// [0, q + 1).
  static MaskSpec causal_blockwise(Tokens block, Tokens window_blocks);
  /// One question (question_percent % of the document, at least one token) then `answers` consecutive
  /// answers of equal length (the last takes the remainder). The question is causal; an answer's row
  /// sees the question and its own answer up to itself.
  static MaskSpec shared_question(Tokens answers, Tokens question_percent);
  /// Row q sees {v in verticals : v <= q} and {q - s : s in slashes, s <= q}. Sorts and de-duplicates;
  /// negative values are rejected.
  static MaskSpec vertical_slash(std::vector<Tokens> verticals, std::vector<Tokens> slashes);
  /// (q, k) is visible iff (q / block, k / block) is listed and k <= q. Sorts and de-duplicates.
  static MaskSpec block_sparse(Tokens block, std::vector<std::pair<Tokens, Tokens>> pairs);
  /// MTraining's blockified vertical-slash pattern: (q, k) is visible iff k <= q and either
  /// q / block - k / block is in `block_offsets` or k is in `verticals`. block >= 1; lists >= 0, sorted
  /// and de-duplicated. Stored in `lists->verticals` and `lists->block_offsets`, `block` = G.
  static MaskSpec vertical_slash_blocks(Tokens block, std::vector<Tokens> verticals, std::vector<Tokens> block_offsets);
  /// `inner` over a document stored in block-striped order over `ranks` ranks with `block`-token blocks
  /// (block 1: token-striped): with n = doc_len / ranks, slot p = a * n + i * block + o (rank a, local
  /// block i, offset o < block) holds original position (i * ranks + a) * block + o. (q, k) in slots is
  /// visible iff inner.allows(source_position(q), source_position(k)). ranks >= 1, block >= 1.
  static MaskSpec striped(MaskSpec inner, int ranks, Tokens block);
  /// Parses "causal", "full", "window:W", "lambda:SINK:WINDOW", "blockwise:B:W", "shared-question:A:P",
  /// "vslash:V1,V2,..:S1,S2,.." (either list may be empty), "blocksparse:B:QB-KB,QB-KB,..",
  /// "vsblocks:G:V1,V2,..:D1,D2,.." and "striped:W:G:INNER" (INNER: any mask text, the last field).
  /// Errors name the offending field (`mask`, `mask window`, ...) and its allowed range.
  static MaskSpec parse(std::string_view text);
  std::string to_string() const;

  /// Vertical-slash, block-sparse and vsblocks: the masks whose planning answers are their causal hull.
  bool is_index_list() const {
    return kind == MaskKind::kVerticalSlash || kind == MaskKind::kBlockSparse || kind == MaskKind::kVerticalSlashBlocks;
  }
  /// Whether `visible`, `keys_needed` and `row_breakpoints` answer a hull (a superset of the visible
  /// pairs: the causal hull of index-list masks, the full square of striped) rather than the exact set.
  bool plans_over_hull() const { return is_index_list() || kind == MaskKind::kStriped; }

  /// Document lengths this mask accepts are the multiples of this: ranks x block for striped (and what
  /// its inner mask needs), 1 for every other kind.
  Tokens length_multiple() const;
  /// Fails (bad input) unless doc_len is at most kMaxDocumentTokens (workload/limits.hpp: every pair count
  /// is exact in 64 bits up to it) and a multiple of length_multiple() (naming `mask striped`, its ranks,
  /// block and the length). `where`, if not empty, prefixes the message (e.g. "documents[3]").
  void check_length(Tokens doc_len, std::string_view where = {}) const;
  /// The original position that slot `slot` of a doc_len-token document holds: the striping
  /// permutation (composed with the inner mask's, if that is striped too); identity for other kinds.
  Tokens source_position(Tokens slot, Tokens doc_len) const;
  /// The slot that holds original position `position`: the inverse of source_position.
  Tokens slot_of(Tokens position, Tokens doc_len) const;

  /// Whether row q may attend to key k (false outside [0, doc_len)). The plain per-pair definition,
  /// for reference kernels and brute-force tests; exact for every kind.
  bool allows(Tokens q, Tokens k, Tokens doc_len) const;
  /// Bit j set iff key key_begin + j (< doc_len) is visible to row q; width in [1, 64]. Exact for every
  /// kind; what kernels call for each row of a partial tile.
  std::uint64_t row_bits(Tokens q, Tokens key_begin, int width, Tokens doc_len) const;
  /// Keys visible to row q of a document of doc_len tokens: at most two disjoint sorted ranges.
  /// Index-list masks: the causal hull [0, q + 1); striped: [0, doc_len).
  SmallRanges visible(Tokens q, Tokens doc_len) const;
  /// Number of visible (q, k) pairs with q in `queries` and k in `keys`. Exact for every kind: O(1) for
  /// band masks, O(log |V| + |V ∩ keys| log |S| + |S ∩ offsets|) for vertical-slash, O(listed pairs
  /// touching the rectangle, each found by binary search) for block-sparse, O(log + |D| + |V ∩ keys|
  /// log |D|) for vsblocks; striped: the inner mask's count over pairs of runs of consecutive original
  /// positions (at most ceil(len / block) + 1 runs a side, merged where they are adjacent), or, when
  /// that is cheaper (small blocks), the inner mask's row_bits per query row over the keys' span.
  Tokens count_pairs(Range queries, Range keys, Tokens doc_len) const;
  /// Visible pairs of the whole document.
  Tokens document_pairs(Tokens doc_len) const { return count_pairs({0, doc_len}, {0, doc_len}, doc_len); }
  /// The keys of `keys` that some row of `queries` can see: what a task reading `keys` must fetch.
  /// Exact for band masks; the causal hull's keys for index-list masks; `keys` for striped.
  SmallRanges keys_needed(Range queries, Range keys, Tokens doc_len) const;
  /// Exact for every kind (from count_pairs).
  TileKind classify(Range queries, Range keys, Tokens doc_len) const;
  /// The vertical columns split off (MaskColumns): what kernels compute as dense tiles of gathered keys.
  MaskColumns split_columns(Tokens doc_len) const;
  /// Rows q at which the shape of visible(q) ∩ keys can change, for key-range boundaries `key_edges`.
  /// Between consecutive such rows every visible-range endpoint moves linearly with q (index-list masks:
  /// those of the causal hull; striped: none, its hull is the full square).
  std::vector<Tokens> row_breakpoints(const std::vector<Tokens>& key_edges, Tokens doc_len) const;

  /// Same kind and parameters; index lists and inner masks are compared by content, not by pointer.
  friend bool operator==(const MaskSpec& a, const MaskSpec& b);
};

/// A mask's vertical columns (vertical-slash and vsblocks, also inside striped): keys that every row at
/// or after them in original positions sees. (q, k) is visible iff `rest` allows it or k is one of
/// `columns` with source_position(k) <= source_position(q). A column's pairs are spread over one key
/// per tile, so a kernel computing them tile by tile does a whole tile's work for a few keys; gathered,
/// 64 columns make one dense tile. Every other kind: no columns, `rest` is the mask itself.
struct MaskColumns {
  MaskSpec rest;
  std::vector<Tokens> columns;  // slots (stored positions) below doc_len, in ascending original position
};

}  // namespace fulcrum
