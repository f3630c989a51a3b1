#include "fulcrum/plan/compile_layout.hpp"

#include "fulcrum/core/error.hpp"

#include <fmt/format.h>

namespace fulcrum::compile_detail {

OwnerMap::OwnerMap(const Batch& batch)
    : by_doc_(batch.documents.size()), by_rank_(static_cast<std::size_t>(batch.ranks)) {
  std::vector<Tokens> next_row(static_cast<std::size_t>(batch.ranks), 0);
  for (const auto& s : batch.segments) {
    by_doc_[s.doc].push_back({s.rank, next_row[s.rank], s.tokens});
    by_rank_[s.rank].push_back({s.doc, s.tokens, next_row[s.rank]});
    next_row[s.rank] += s.tokens.size();
  }
}

std::vector<OwnerMap::Piece> OwnerMap::pieces(int doc, Range tokens) const {
  std::vector<Piece> out;
  for (const auto& p : by_doc_[doc]) {
    const Range cut = intersect(p.tokens, tokens);
    if (!cut.empty()) out.push_back({p.rank, p.row + (cut.begin - p.tokens.begin), cut});
  }
  return out;
}

bool OwnerMap::owned_by(int doc, Range tokens, int rank) const {
  for (const auto& p : pieces(doc, tokens)) {
    if (p.rank != rank) return false;
  }
  return true;
}

std::vector<OwnedRows> OwnerMap::owned_rows(int rank) const { return by_rank_[rank]; }

namespace {

bool is_gradient(Field f) { return f == Field::kDQ || f == Field::kDK || f == Field::kDV; }

}  // namespace

RankBuilder::RankBuilder(int rank, const OwnerMap& owners, Pass pass, int nano_batches, int kv_heads)
    : rank_(rank),
      pass_(pass),
      owned_(owners.owned_rows(rank)),
      nano_batches_(nano_batches),
      kv_heads_(kv_heads),
      q_rows_(2 * static_cast<std::size_t>(nano_batches), 0),
      kv_rows_(q_rows_),
      keys_(q_rows_.size()),
      compute_(q_rows_.size()),
      dispatch_(static_cast<std::size_t>(nano_batches)),
      return_(dispatch_),
      dispatch_copies_(dispatch_.size()) {
  for (int nb = 0; nb < nano_batches; ++nb) {
    dispatch_[nb].id = 2 * nb;
    return_[nb].id = 2 * nb + 1;
    return_[nb].kind = CommKind::kReturn;
  }
  if (pass == Pass::kForward) {
    for (Field f : {Field::kQ, Field::kK, Field::kV}) add_buffer(to_string(f), f, BufferInit::kInput, false);
    add_buffer("o", Field::kO, BufferInit::kZero, true);
    add_buffer("lse", Field::kLse, BufferInit::kNegInf, true);
  } else {
    for (Field f : {Field::kQ, Field::kK, Field::kV, Field::kO, Field::kLse, Field::kDO}) {
      add_buffer(to_string(f), f, BufferInit::kInput, false);
    }
    for (Field f : {Field::kDQ, Field::kDK, Field::kDV}) add_buffer(to_string(f), f, BufferInit::kZero, true);
  }
  for (auto& b : buffers_) b.rows = 0;
  Tokens rows = 0;
  for (const auto& o : owned_) rows += o.tokens.size();
  for (auto& b : buffers_) b.rows = rows;
  for (std::size_t i = 0; i < buffers_.size(); ++i) own_[buffers_[i].field] = static_cast<int>(i);
}

int RankBuilder::add_buffer(const std::string& name, Field field, BufferInit init, bool output) {
  buffers_.push_back({name, field, 0, init, output});
  return static_cast<int>(buffers_.size()) - 1;
}

int RankBuilder::own(Field field) const { return own_.at(field); }

int RankBuilder::workspace(int slot, Field field) {
  auto [it, fresh] = workspace_.try_emplace({slot, field}, 0);
  if (fresh) {
    // Gradients accumulate and K/V rows between fetched keys are read (then masked), so both start at
    // zero; every other workspace row is written by a fetch or by the attention call before it is read.
    // A head-split task's rows are fetched, computed and returned for its heads only (Slice::heads), so
    // no head of a workspace row that no task computes ever leaves the server.
    const bool zero = is_gradient(field) || field == Field::kK || field == Field::kV;
    it->second = add_buffer(fmt::format("ws{}.{}.{}", slot / 2, slot % 2 ? "local" : "remote", to_string(field)), field,
                            zero ? BufferInit::kZero : BufferInit::kUndefined, false);
  }
  return it->second;
}

int RankBuilder::part(Field field) {
  auto [it, fresh] = part_.try_emplace(field, 0);
  if (fresh) it->second = add_buffer(fmt::format("part.{}", to_string(field)), field, BufferInit::kUndefined, false);
  return it->second;
}

Tokens RankBuilder::allocate_q_rows(int slot, Tokens rows) {
  const Tokens row = q_rows_[slot];
  q_rows_[slot] += rows;
  return row;
}

Tokens RankBuilder::allocate_part_rows(Field field, Tokens rows) {
  const Tokens row = part_rows_[field];
  part_rows_[field] += rows;
  return row;
}

void RankBuilder::reserve_keys(int slot, int doc, Range keys) {
  keys_[slot].try_emplace(doc, KeyBlocks{{}, {}, PerHeadRangeSet(kv_heads_)}).first->second.reserved.add(keys);
}

void RankBuilder::allocate_key_blocks() {
  for (std::size_t slot = 0; slot < keys_.size(); ++slot) {
    for (auto& [doc, k] : keys_[slot]) {
      if (!k.blocks.empty()) continue;  // allocated before
      for (const auto& r : k.reserved.ranges()) {
        k.blocks.emplace_back(r, kv_rows_[slot]);
        kv_rows_[slot] += r.size();
      }
    }
  }
}

Tokens RankBuilder::key_row(int slot, int doc, Tokens position) const {
  for (const auto& [tokens, row] : keys_[slot].at(doc).blocks) {
    if (tokens.contains(position)) return row + (position - tokens.begin);
  }
  FULCRUM_CHECK(false, "rank {}: key {} of document {} was not reserved in workspace {}", rank_, position, doc, slot);
}

std::vector<KeyPiece> RankBuilder::keys_missing(int slot, int doc, Range needed, HeadRange heads) {
  std::vector<KeyPiece> out;
  for (const auto& p : keys_[slot].at(doc).fetched.add_missing(needed, heads.first(), heads.last(kv_heads_))) {
    out.push_back({p.tokens, HeadRange{p.head_begin, p.head_end}.normalized(kv_heads_)});
  }
  return out;
}

void RankBuilder::add_compute(int slot, std::vector<AttentionItem> items) {
  auto& list = compute_[slot];
  list.insert(list.end(), items.begin(), items.end());
}

Operation RankBuilder::attention_call(int slot, std::vector<AttentionItem> items) {
  auto ws = [&](Field f) { return workspace(slot, f); };
  if (pass_ == Pass::kForward) {
    return Attention{ws(Field::kQ), ws(Field::kK), ws(Field::kV), ws(Field::kO), ws(Field::kLse), std::move(items)};
  }
  return AttentionBackward{ws(Field::kQ),  ws(Field::kK),  ws(Field::kV),  ws(Field::kO),  ws(Field::kLse),
                           ws(Field::kDO), ws(Field::kDQ), ws(Field::kDK), ws(Field::kDV), std::move(items)};
}

Program RankBuilder::finish() {
  Program p;
  p.rank = rank_;
  p.owned = owned_;
  auto emit = [&](Operation op, int stream) { p.instructions.push_back({std::move(op), stream}); };
  auto launch = [&](const CommLaunch& l, int stream) {
    if (!l.sends.empty() || !l.receives.empty()) emit(l, stream);
  };
  auto wait = [&](const CommLaunch& l, int stream) {
    if (!l.sends.empty() || !l.receives.empty()) emit(CommWait{l.id}, stream);
  };
  auto compute = [&](int nb, bool local) {
    const int slot = workspace_slot(nb, local);
    if (!compute_[slot].empty()) emit(attention_call(slot, std::move(compute_[slot])), nb);
  };
  // Nano-batch i+1's dispatch is in flight while nano-batch i computes (0 and 1 start together); the
  // local work of every nano-batch but the last runs before its dispatch is waited for, the last one's
  // after, so it hides the returns (for two nano-batches this is the ping-pong order of compile.hpp).
  const int last = nano_batches_ - 1;
  launch(dispatch_[0], 0);
  if (last >= 1) launch(dispatch_[1], 1);
  for (int nb = 0; nb <= last; ++nb) {
    for (const auto& c : dispatch_copies_[nb]) emit(c, nb);
  }
  for (int nb = 0; nb <= last; ++nb) {
    if (nb >= 1 && nb + 1 <= last) launch(dispatch_[nb + 1], nb + 1);
    if (nb < last) compute(nb, true);
    wait(dispatch_[nb], nb);
    compute(nb, false);
    launch(return_[nb], nb);
  }
  compute(last, true);
  for (int nb = 0; nb <= last; ++nb) wait(return_[nb], nb);
  for (const auto& c : return_copies_) emit(c, 0);
  for (auto& r : reduces_) emit(std::move(r), 0);

  // Workspace sizes are known only now.
  for (const auto& [key, index] : workspace_) {
    const auto [slot, field] = key;
    buffers_[index].rows = is_kv_side(field) ? kv_rows_[slot] : q_rows_[slot];
  }
  for (const auto& [field, index] : part_) buffers_[index].rows = part_rows_[field];
  p.buffers = buffers_;
  return p;
}

}  // namespace fulcrum::compile_detail
