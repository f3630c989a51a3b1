#include "fulcrum/sim/layer_chain.hpp"

#include "fulcrum/core/error.hpp"

#include <algorithm>
#include <map>
#include <variant>

namespace fulcrum::sim {
namespace {

// What copy `c` of a layer renames: buffers, launch ids (per rank) and message tags (per sender and
// receiver pair), each shifted past the previous copies'.
struct Shift {
  int buffers = 0, launches = 0, tags = 0;
};

void shift(Slice& s, const Shift& by) { s.buffer += by.buffers; }

Operation shifted(Operation op, const Shift& by) {
  std::visit(
      [&](auto& o) {
        using T = std::decay_t<decltype(o)>;
        if constexpr (std::is_same_v<T, CommLaunch>) {
          o.id += by.launches;
          for (auto* list : {&o.sends, &o.receives}) {
            for (auto& m : *list) {
              m.tag += by.tags;
              shift(m.slice, by);
            }
          }
        } else if constexpr (std::is_same_v<T, CommWait>) {
          o.launch += by.launches;
        } else if constexpr (std::is_same_v<T, Attention>) {
          for (int* b : {&o.q, &o.k, &o.v, &o.o, &o.lse}) *b += by.buffers;
        } else if constexpr (std::is_same_v<T, AttentionBackward>) {
          for (int* b : {&o.q, &o.k, &o.v, &o.o, &o.lse, &o.d_o, &o.dq, &o.dk, &o.dv}) *b += by.buffers;
        } else if constexpr (std::is_same_v<T, Reduce>) {
          shift(o.out, by);
          shift(o.out_lse, by);
          for (auto* list : {&o.parts, &o.part_lse}) {
            for (auto& s : *list) shift(s, by);
          }
        } else {
          static_assert(std::is_same_v<T, Copy>);
          shift(o.src, by);
          shift(o.dst, by);
        }
      },
      op);
  return op;
}

// A rank's Program cut where the chained schedule interleaves layers.
struct Parts {
  std::vector<std::size_t> front, back;          // the body before / from nano-batch 1's first launch
  std::vector<std::size_t> tail_nb0, tail_rest;  // the tail: nano-batch 0's return waits / the rest
  bool split = false;
};

Parts cut(const Program& p, bool split) {
  std::map<int, CommKind> kinds;
  for (const auto& in : p.instructions) {
    if (const auto* l = std::get_if<CommLaunch>(&in.op)) kinds[l->id] = l->kind;
  }
  auto returns_wait = [&](const Instruction& in) {
    const auto* w = std::get_if<CommWait>(&in.op);
    if (w == nullptr) return false;
    const auto kind = kinds.find(w->launch);
    if (kind == kinds.end()) fail("rank {}: a wait for launch {}, which the program never starts", p.rank, w->launch);
    return kind->second == CommKind::kReturn;
  };
  const auto tail = static_cast<std::size_t>(std::find_if(p.instructions.begin(), p.instructions.end(), returns_wait) -
                                             p.instructions.begin());
  std::size_t second = tail;
  if (split) {
    for (std::size_t i = 0; i < tail; ++i) {
      const Instruction& in = p.instructions[i];
      if (in.stream == 1 && std::holds_alternative<CommLaunch>(in.op)) {
        second = i;
        break;
      }
    }
  }
  Parts parts;
  parts.split = second < tail;
  for (std::size_t i = 0; i < tail; ++i) (i < second ? parts.front : parts.back).push_back(i);
  for (std::size_t i = tail; i < p.instructions.size(); ++i) {
    const Instruction& in = p.instructions[i];
    (parts.split && in.stream == 0 && returns_wait(in) ? parts.tail_nb0 : parts.tail_rest).push_back(i);
  }
  return parts;
}

void check_matrix_work(const Plan& layer, const std::vector<double>& matrix_s) {
  if (matrix_s.size() != layer.programs.size()) {
    fail("matrix work for {} ranks: the plan has {}", matrix_s.size(), layer.programs.size());
  }
}

}  // namespace

SimOptions layer_matrix_work(const Plan& layer, const std::vector<double>& matrix_s, bool split) {
  check_matrix_work(layer, matrix_s);
  SimOptions options;
  for (std::size_t r = 0; r < layer.programs.size(); ++r) {
    const Parts parts = cut(layer.programs[r], split);
    if (parts.split) {
      options.extra_compute.push_back({{0, matrix_s[r] / 2}, {parts.front.size(), matrix_s[r] / 2}});
    } else {
      options.extra_compute.push_back({{0, matrix_s[r]}});
    }
  }
  return options;
}

LayerChain chain_layers(const Plan& layer, const std::vector<double>& matrix_s, bool split, int layers) {
  if (layers < 1) fail("layers = {}: must be at least 1", layers);
  check_matrix_work(layer, matrix_s);
  int tags = 0;  // one past the largest tag of any message
  for (const auto& p : layer.programs) {
    for (const auto& in : p.instructions) {
      if (const auto* l = std::get_if<CommLaunch>(&in.op)) {
        for (const auto* list : {&l->sends, &l->receives}) {
          for (const auto& m : *list) tags = std::max(tags, m.tag + 1);
        }
      }
    }
  }
  LayerChain chain;
  chain.plan = {layer.pass, layer.planner, layer.mode, layer.nano_batches, layer.heads, layer.documents, {}};
  chain.plan.programs.resize(layer.programs.size());
  chain.options.extra_compute.resize(layer.programs.size());
  for (std::size_t r = 0; r < layer.programs.size(); ++r) {
    const Program& p = layer.programs[r];
    int launches = 0;
    for (const auto& in : p.instructions) {
      if (const auto* l = std::get_if<CommLaunch>(&in.op)) launches = std::max(launches, l->id + 1);
    }
    const Parts parts = cut(p, split);
    Program& out = chain.plan.programs[r];
    out.rank = p.rank;
    out.owned = p.owned;
    auto& extra = chain.options.extra_compute[r];
    auto emit = [&](const std::vector<std::size_t>& indices, int copy) {
      const Shift by{copy * static_cast<int>(p.buffers.size()), copy * launches, copy * tags};
      for (std::size_t i : indices)
        out.instructions.push_back({shifted(p.instructions[i].op, by), p.instructions[i].stream});
    };
    auto matrix = [&](double seconds) { extra.push_back({out.instructions.size(), seconds}); };
    const double half = parts.split ? matrix_s[r] / 2 : matrix_s[r];
    for (int c = 0; c < layers; ++c) {
      out.buffers.insert(out.buffers.end(), p.buffers.begin(), p.buffers.end());
      if (c > 0) emit(parts.tail_nb0, c - 1);  // (empty unless split)
      if (c > 0 && !parts.split) emit(parts.tail_rest, c - 1);
      matrix(half);
      emit(parts.front, c);
      if (!parts.split) continue;
      if (c > 0) emit(parts.tail_rest, c - 1);
      matrix(half);
      emit(parts.back, c);
    }
    emit(parts.tail_nb0, layers - 1);
    emit(parts.tail_rest, layers - 1);
  }
  return chain;
}

}  // namespace fulcrum::sim
