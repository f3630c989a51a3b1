#include "fulcrum/plan/program_labels.hpp"

#include "fulcrum/core/random.hpp"
#include "fulcrum/workload/head_masks.hpp"

#include <fmt/format.h>

namespace fulcrum::program_labels {
namespace {

constexpr std::size_t kMaxErrors = 40;

// A contribution is named by where it was computed and by its item's heads, so that the parts of a row
// split over heads are tracked as different contributions and each must reach the owner exactly once.
std::uint64_t contribution_id(int rank, std::size_t at, int buffer, Tokens row, std::size_t item, HeadRange heads) {
  const std::uint64_t head_bits = heads.all() ? 0
                                              : mix64((static_cast<std::uint64_t>(heads.begin) << 32) ^
                                                      static_cast<std::uint64_t>(heads.end) ^ 0x4845414453ull);
  return (mix64(mix64(mix64(mix64(static_cast<std::uint64_t>(rank)) ^ at) ^ static_cast<std::uint64_t>(buffer)) ^
                static_cast<std::uint64_t>(row)) ^
          mix64(item)) +
         head_bits;
}

}  // namespace

bool cuts_heads(const Plan& plan) {
  auto partial = [](const Slice& s) { return !s.heads.all(); };
  for (const auto& p : plan.programs) {
    for (const auto& in : p.instructions) {
      const auto& op = in.op;
      bool cut = false;
      if (const auto* c = std::get_if<Copy>(&op)) cut = partial(c->src) || partial(c->dst);
      if (const auto* l = std::get_if<CommLaunch>(&op)) {
        for (const auto* list : {&l->sends, &l->receives}) {
          for (const auto& m : *list) cut = cut || partial(m.slice);
        }
      }
      if (const auto* r = std::get_if<Reduce>(&op)) {
        cut = partial(r->out) || partial(r->out_lse);
        for (const auto* list : {&r->parts, &r->part_lse}) {
          for (const auto& part : *list) cut = cut || partial(part);
        }
      }
      const std::vector<AttentionItem>* items = nullptr;
      if (const auto* att = std::get_if<Attention>(&op)) items = &att->items;
      if (const auto* att = std::get_if<AttentionBackward>(&op)) items = &att->items;
      if (items) {
        for (const auto& item : *items) cut = cut || !item.heads.all();
      }
      if (cut) return true;
    }
  }
  return false;
}

template <typename... Args>
void Machine::error(fmt::format_string<Args...> format, Args&&... args) {
  if (errors_.size() < kMaxErrors) errors_.push_back(fmt::format(format, std::forward<Args>(args)...));
}

Machine::Machine(const Plan& plan, std::vector<std::string>& errors)
    : plan_(plan),
      errors_(errors),
      per_head_(cuts_heads(plan)),
      labels_(plan.programs.size()),
      running_(plan.programs.size()),
      in_flight_(plan.programs.size()) {
  for (const auto& p : plan.programs) {
    auto& mine = labels_[p.rank];
    for (const auto& b : p.buffers) {
      const bool zero = b.init == BufferInit::kZero || b.init == BufferInit::kNegInf;
      const int w = per_head_ ? plan.heads.heads_of(b.field) : 1;
      mine.emplace_back(static_cast<std::size_t>(b.rows * w),
                        Label{-1, b.field, zero ? LabelState::kZero : LabelState::kUndefined});
      if (b.init != BufferInit::kInput) continue;
      for (const auto& owned : p.owned) {
        for (Tokens i = 0; i < owned.tokens.size(); ++i) {
          if (owned.row + i >= b.rows) continue;
          for (int c = 0; c < w; ++c) {
            mine.back()[static_cast<std::size_t>((owned.row + i) * w + c)] = {
                owned.doc, b.field, LabelState::kValue, owned.tokens.begin + i, 0, 0, head_of(c)};
          }
        }
      }
    }
  }
}

int Machine::width(int rank, int buffer) const {
  return per_head_ ? plan_.heads.heads_of(plan_.programs[rank].buffers[buffer].field) : 1;
}

Machine::Cells Machine::cells(int rank, const Slice& s) const {
  if (!per_head_) return {};
  return {s.heads.first(), s.heads.last(width(rank, s.buffer))};
}

Machine::Cells Machine::cells(int rank, int buffer, HeadRange q) const {
  if (!per_head_) return {};
  const HeadRange h = plan_.heads.field_heads(plan_.programs[rank].buffers[buffer].field, q);
  return {h.first(), h.last(width(rank, buffer))};
}

bool Machine::ready(int rank, const Operation& op) const {
  const auto* w = std::get_if<CommWait>(&op);
  if (!w) return true;
  const CommLaunch* l = running_[rank].at(w->launch);
  for (const auto& m : l->receives) {
    if (!wire_.count({m.peer, rank, m.tag})) return false;
  }
  for (const auto& m : l->sends) {
    if (!posted_receives_.count({rank, m.peer, m.tag})) return false;
  }
  return true;
}

std::vector<Label> Machine::gather(int rank, const Slice& s) {
  const Cells c = cells(rank, s);
  std::vector<Label> out;
  out.reserve(static_cast<std::size_t>(s.rows * (c.end - c.begin)));
  for (Tokens i = s.row; i < s.row + s.rows; ++i) {
    for (int h = c.begin; h < c.end; ++h) out.push_back(label(rank, s.buffer, i, h));
  }
  return out;
}

bool Machine::readable(int rank, std::size_t at, const Slice& s, const char* what) {
  const Cells c = cells(rank, s);
  for (Tokens i = s.row; i < s.row + s.rows; ++i) {
    for (int h = c.begin; h < c.end; ++h) {
      if (label(rank, s.buffer, i, h).state == LabelState::kUndefined) {
        error("rank {} instruction {}: {} reads row {}{} of '{}' before anything wrote it", rank, at, what, i,
              per_head_ ? fmt::format(" head {}", h) : "", plan_.programs[rank].buffers[s.buffer].name);
        return false;
      }
    }
  }
  return true;
}

void Machine::write(int rank, std::size_t at, const Slice& dst, const std::vector<Label>& values) {
  const Cells c = cells(rank, dst);
  if (values.size() != static_cast<std::size_t>(dst.rows * (c.end - c.begin))) {
    error("rank {} instruction {}: {} rows x {} heads of '{}' written from a slice of another shape", rank, at,
          dst.rows, c.end - c.begin, plan_.programs[rank].buffers[dst.buffer].name);
    return;
  }
  std::size_t n = 0;
  for (Tokens i = 0; i < dst.rows; ++i) {
    for (int h = c.begin; h < c.end; ++h) {
      Label& l = label(rank, dst.buffer, dst.row + i, h);
      if (l.contributions > 0) {
        error("rank {} instruction {}: overwrites results already in row {} of '{}'", rank, at, dst.row + i,
              plan_.programs[rank].buffers[dst.buffer].name);
        return;
      }
      l = values[n++];
    }
  }
}

void Machine::expect_value(int rank, std::size_t at, int buffer, Tokens row, int cell, int doc, Tokens position,
                           Field field) {
  const Label& l = label(rank, buffer, row, cell);
  if (l.state != LabelState::kValue || l.contributions > 0 || l.doc != doc || l.position != position ||
      l.field != field || l.head != head_of(cell)) {
    const std::string head = per_head_ ? fmt::format(" head {}", cell) : "";
    error("rank {} instruction {}: row {}{} of '{}' should hold {} of document {} token {}{}, holds {}", rank, at, row,
          head, plan_.programs[rank].buffers[buffer].name, to_string(field), doc, position, head,
          l.state == LabelState::kValue ? fmt::format("document {} token {}{}", l.doc, l.position,
                                                      per_head_ ? fmt::format(" head {}", l.head) : "")
                                        : "no token");
  }
}

void Machine::contribute(int rank, std::size_t at, int buffer, Tokens row, int cell, int doc, Tokens position,
                         std::uint64_t id, bool accumulate) {
  Label& l = label(rank, buffer, row, cell);
  const Field field = plan_.programs[rank].buffers[buffer].field;
  if (l.contributions > 0 && (!accumulate || l.doc != doc || l.position != position)) {
    error("rank {} instruction {}: row {} of '{}' already holds results of document {} token {}", rank, at, row,
          plan_.programs[rank].buffers[buffer].name, l.doc, l.position);
    return;
  }
  if (l.contributions == 0) l = {doc, field, LabelState::kValue, position, 0, 0, head_of(cell)};
  ++l.contributions;
  l.hash += id;
  auto& e = expected_[{doc, position, field, head_of(cell)}];
  ++e.first;
  e.second += id;
}

void Machine::check_items(int rank, std::size_t at, const std::vector<AttentionItem>& items,
                          std::span<const int> q_side, int k, int v) {
  const Program& p = plan_.programs[rank];
  for (const auto& item : items) {
    const auto& doc = plan_.documents[item.doc];
    const auto runs = mask_runs(doc.mask, doc.head_masks, item.heads);
    const Cells kv = cells(rank, k, item.heads);
    for (const auto& span : item.queries) {
      for (Tokens i = 0; i < span.count; ++i) {
        for (int b : q_side) {
          const Cells c = cells(rank, b, item.heads);
          for (int h = c.begin; h < c.end; ++h) {
            expect_value(rank, at, b, span.row + i, h, item.doc, span.position + i, p.buffers[b].field);
          }
        }
      }
      if (span.count == 0) continue;
      const Range queries{span.position, span.position + span.count};
      const Range keys{item.keys.position, item.keys.position + item.keys.count};
      for (const auto& needed : keys_needed(runs, queries, keys, doc.length)) {
        for (Tokens key = needed.begin; key < needed.end; ++key) {
          const Tokens row = item.keys.row + (key - item.keys.position);
          for (int h = kv.begin; h < kv.end; ++h) {
            expect_value(rank, at, k, row, h, item.doc, key, Field::kK);
            expect_value(rank, at, v, row, h, item.doc, key, Field::kV);
          }
        }
      }
    }
    if (errors_.size() >= kMaxErrors) return;
  }
}

// Items of one call may write the same output rows over disjoint heads (the kernels' one writer per
// (row, head)); such items add their contributions to the rows, others must find them empty.
std::vector<char> Machine::shared_rows(int rank, std::size_t at, const std::vector<AttentionItem>& items) {
  struct Writer {
    Tokens begin, end;
    int h0, h1;
    std::size_t item;
  };
  const int q_heads = plan_.heads.q_heads;
  std::vector<Writer> writers;
  for (std::size_t n = 0; n < items.size(); ++n) {
    for (const auto& span : items[n].queries) {
      if (span.count > 0) {
        writers.push_back({span.row, span.row + span.count, items[n].heads.first(), items[n].heads.last(q_heads), n});
      }
    }
  }
  std::sort(writers.begin(), writers.end(), [](const Writer& x, const Writer& y) { return x.begin < y.begin; });
  std::vector<char> shared(items.size(), 0);
  std::vector<const Writer*> open;
  for (const auto& w : writers) {
    std::erase_if(open, [&](const Writer* o) { return o->end <= w.begin; });
    for (const Writer* o : open) {
      if (o->h0 < w.h1 && w.h0 < o->h1) {
        error("rank {} instruction {}: items {} and {} both write heads [{}, {}) of rows [{}, {})", rank, at, o->item,
              w.item, std::max(o->h0, w.h0), std::min(o->h1, w.h1), std::max(o->begin, w.begin),
              std::min(o->end, w.end));
      }
      shared[o->item] = shared[w.item] = 1;
    }
    open.push_back(&w);
  }
  return shared;
}

void Machine::attention(int rank, std::size_t at, const Attention& a) {
  const int q_side[] = {a.q};
  check_items(rank, at, a.items, q_side, a.k, a.v);
  const std::vector<char> shared = shared_rows(rank, at, a.items);
  for (std::size_t n = 0; n < a.items.size(); ++n) {
    for (const auto& span : a.items[n].queries) {
      for (Tokens i = 0; i < span.count; ++i) {
        for (int b : {a.o, a.lse}) {
          const Cells c = cells(rank, b, a.items[n].heads);
          for (int h = c.begin; h < c.end; ++h) {
            contribute(rank, at, b, span.row + i, h, a.items[n].doc, span.position + i,
                       contribution_id(rank, at, b, span.row + i, n, a.items[n].heads), shared[n] != 0);
          }
        }
      }
    }
  }
}

void Machine::attention_backward(int rank, std::size_t at, const AttentionBackward& a) {
  const int q_side[] = {a.q, a.o, a.lse, a.d_o};
  check_items(rank, at, a.items, q_side, a.k, a.v);
  for (std::size_t n = 0; n < a.items.size(); ++n) {
    const auto& item = a.items[n];
    const auto& doc = plan_.documents[item.doc];
    const auto runs = mask_runs(doc.mask, doc.head_masks, item.heads);
    const Cells q = cells(rank, a.dq, item.heads), kv = cells(rank, a.dk, item.heads);
    for (const auto& span : item.queries) {
      if (span.count == 0) continue;
      for (Tokens i = 0; i < span.count; ++i) {
        for (int h = q.begin; h < q.end; ++h) {
          contribute(rank, at, a.dq, span.row + i, h, item.doc, span.position + i,
                     contribution_id(rank, at, a.dq, span.row + i, n, item.heads), true);
        }
      }
      // dK and dV get a contribution from every (item, query span) that sees the key, in each kv head
      // its q heads read.
      const Range queries{span.position, span.position + span.count};
      const Range keys{item.keys.position, item.keys.position + item.keys.count};
      for (const auto& needed : keys_needed(runs, queries, keys, doc.length)) {
        for (Tokens key = needed.begin; key < needed.end; ++key) {
          const Tokens row = item.keys.row + (key - item.keys.position);
          for (int b : {a.dk, a.dv}) {
            for (int h = kv.begin; h < kv.end; ++h) {
              contribute(rank, at, b, row, h, item.doc, key,
                         contribution_id(rank, at, b, row, n, item.heads) + span.row, true);
            }
          }
        }
      }
    }
  }
}

void Machine::reduce(int rank, std::size_t at, const Reduce& r) {
  const bool merge = r.op == ReduceOp::kMerge;
  std::vector<std::pair<Slice, const std::vector<Slice>*>> groups = {{r.out, &r.parts}};
  if (merge) groups.emplace_back(r.out_lse, &r.part_lse);
  for (const auto& [out, parts] : groups) {
    const Cells oc = cells(rank, out);
    for (Tokens i = 0; i < out.rows; ++i) {
      for (int h = oc.begin; h < oc.end; ++h) {
        Label result = label(rank, out.buffer, out.row + i, h);
        if (merge && result.contributions > 0) {
          error("rank {} instruction {}: merge into row {} that already holds results", rank, at, out.row + i);
          return;
        }
        for (const auto& part : *parts) {
          // The part's cell in the same place of its own heads (same_shape made the counts equal).
          const Label& l = label(rank, part.buffer, part.row + i, cells(rank, part).begin + (h - oc.begin));
          if (l.contributions == 0 || l.head != head_of(h) ||
              (result.contributions > 0 && (l.doc != result.doc || l.position != result.position))) {
            error("rank {} instruction {}: reduce part row {}{} of '{}' holds no results of the output's token", rank,
                  at, part.row + i, per_head_ ? fmt::format(" head {}", h) : "",
                  plan_.programs[rank].buffers[part.buffer].name);
            return;
          }
          if (result.contributions == 0) result = {l.doc, result.field, LabelState::kValue, l.position, 0, 0, l.head};
          result.contributions += l.contributions;
          result.hash += l.hash;
        }
        label(rank, out.buffer, out.row + i, h) = result;
      }
    }
  }
}

void Machine::touch(int rank, std::size_t at, const Slice& s, bool write) {
  const int heads = plan_.heads.heads_of(plan_.programs[rank].buffers[s.buffer].field);
  for (const auto& f : in_flight_[rank]) {
    const bool overlap = f.slice.buffer == s.buffer && f.slice.row < s.row + s.rows &&
                         s.row < f.slice.row + f.slice.rows && f.slice.heads.first() < s.heads.last(heads) &&
                         s.heads.first() < f.slice.heads.last(heads);
    if (overlap && (write || f.receive)) {
      error("rank {} instruction {}: {} rows [{}, {}) of '{}' while launch {} is still {} them", rank, at,
            write ? "writes" : "reads", s.row, s.row + s.rows, plan_.programs[rank].buffers[s.buffer].name, f.launch,
            f.receive ? "receiving into" : "sending");
      return;
    }
  }
}

// The kernels copy every row of their input buffers (head-major), so a call reads whole buffers.
void Machine::touch_buffer(int rank, std::size_t at, int buffer, bool write) {
  touch(rank, at, {buffer, 0, plan_.programs[rank].buffers[buffer].rows}, write);
}

void Machine::step(int rank, std::size_t at, const Operation& op) {
  if (const auto* c = std::get_if<Copy>(&op)) {
    touch(rank, at, c->src, false);
    touch(rank, at, c->dst, true);
    if (!readable(rank, at, c->src, "copy")) return;
    write(rank, at, c->dst, gather(rank, c->src));
  } else if (const auto* l = std::get_if<CommLaunch>(&op)) {
    running_[rank][l->id] = l;  // first, so its wait finds it even when a send below is reported
    for (const auto& m : l->receives) {
      touch(rank, at, m.slice, true);
      posted_receives_.insert({m.peer, rank, m.tag});
      in_flight_[rank].push_back({l->id, m.slice, true});
    }
    for (const auto& m : l->sends) {
      touch(rank, at, m.slice, false);
      in_flight_[rank].push_back({l->id, m.slice, false});
      if (!readable(rank, at, m.slice, "send")) continue;
      wire_[{rank, m.peer, m.tag}] = gather(rank, m.slice);
    }
  } else if (const auto* w = std::get_if<CommWait>(&op)) {
    const CommLaunch* launch = running_[rank].at(w->launch);
    std::erase_if(in_flight_[rank], [&](const InFlight& f) { return f.launch == w->launch; });
    for (const auto& m : launch->receives) {
      const auto it = wire_.find({m.peer, rank, m.tag});
      if (it != wire_.end()) write(rank, at, m.slice, it->second);
    }
    running_[rank].erase(w->launch);
  } else if (const auto* a = std::get_if<Attention>(&op)) {
    for (int b : {a->q, a->k, a->v}) touch_buffer(rank, at, b, false);
    for (int b : {a->o, a->lse}) touch_buffer(rank, at, b, true);
    attention(rank, at, *a);
  } else if (const auto* b = std::get_if<AttentionBackward>(&op)) {
    for (int x : {b->q, b->k, b->v, b->o, b->lse, b->d_o}) touch_buffer(rank, at, x, false);
    for (int x : {b->dq, b->dk, b->dv}) touch_buffer(rank, at, x, true);
    attention_backward(rank, at, *b);
  } else if (const auto* r = std::get_if<Reduce>(&op)) {
    for (const auto* list : {&r->parts, &r->part_lse}) {
      for (const auto& part : *list) touch(rank, at, part, false);
    }
    touch(rank, at, r->out, true);
    if (r->op == ReduceOp::kMerge) touch(rank, at, r->out_lse, true);
    reduce(rank, at, *r);
  }
}

void Machine::check_outputs() {
  std::map<TokenKey, std::pair<std::uint64_t, std::uint64_t>> seen;
  for (const auto& p : plan_.programs) {
    for (std::size_t b = 0; b < p.buffers.size(); ++b) {
      if (!p.buffers[b].output) continue;
      const int w = width(p.rank, static_cast<int>(b));
      for (const auto& owned : p.owned) {
        for (Tokens i = 0; i < owned.tokens.size(); ++i) {
          for (int h = 0; h < w; ++h) {
            const Label& l = label(p.rank, static_cast<int>(b), owned.row + i, h);
            if (l.contributions == 0) continue;
            if (l.doc != owned.doc || l.position != owned.tokens.begin + i || l.head != head_of(h)) {
              error("rank {}: output '{}' row {} (document {} token {}{}) holds results of document {} token {}{}",
                    p.rank, p.buffers[b].name, owned.row + i, owned.doc, owned.tokens.begin + i,
                    per_head_ ? fmt::format(" head {}", h) : "", l.doc, l.position,
                    per_head_ ? fmt::format(" head {}", l.head) : "");
              continue;
            }
            seen[{l.doc, l.position, p.buffers[b].field, l.head}] = {l.contributions, l.hash};
          }
        }
      }
    }
  }
  for (const auto& [key, want] : expected_) {
    const auto [doc, position, field, head] = key;
    const auto it = seen.find(key);
    const auto got = it == seen.end() ? std::pair<std::uint64_t, std::uint64_t>{0, 0} : it->second;
    if (got != want) {
      error("document {} token {}{}: {} of {} contributions reached the owner's {}{}", doc, position,
            head >= 0 ? fmt::format(" head {}", head) : "", got.first, want.first, to_string(field),
            got.first == want.first ? " (a different set)" : "");
    }
  }
}

}  // namespace fulcrum::program_labels
