#include "fulcrum/runtime/executor.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/cost/attention_cost.hpp"
#include "fulcrum/kernels/attention.hpp"
#include "fulcrum/kernels/merge.hpp"

#include <algorithm>
#include <cstring>
#include <ctime>
#include <iterator>
#include <map>
#include <tuple>

namespace fulcrum::runtime {
namespace {

double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Total length of a set of intervals, overlaps counted once.
double union_length(std::vector<std::pair<double, double>> intervals) {
  std::sort(intervals.begin(), intervals.end());
  double total = 0, end = -1e300;
  for (auto [a, b] : intervals) {
    a = std::max(a, end);
    if (b > a) {
      total += b - a;
      end = b;
    }
  }
  return total;
}

// A launch in flight, and the staging blocks of its head-sliced messages.
struct Launch {
  std::vector<WireMessage> sends, receives;
  double sent = 0, received = 0;
  const char* name = "";
  int stream = 0;
  int handle = 0;
  std::vector<std::vector<std::byte>> staging;
  std::vector<std::pair<Slice, std::size_t>> to_scatter;  // a receive's slice and its staging block
};

template <class T>
class Runner {
 public:
  Runner(const Plan& plan, RankBuffers& buffers, Communicator& comm, const ExecuteOptions& options)
      : plan_(plan), program_(plan.programs.at(comm.rank())), buffers_(buffers), comm_(comm), options_(options) {
    shape_.q_heads = plan.heads.q_heads;
    shape_.kv_heads = plan.heads.kv_heads;
    shape_.head_dim = plan.heads.head_dim;
    shape_.deterministic = options.deterministic;
  }

  ExecutionResult run() {
    const double begin = Communicator::now_s();
    for (const auto& instruction : program_.instructions) {
      stream_ = instruction.stream;
      std::visit([this](const auto& op) { this->step(op); }, instruction.op);
    }
    result_.summary.total_s = Communicator::now_s() - begin;
    return std::move(result_);
  }

 private:
  void record(Track track, const char* name, double start, double end, double bytes, double flops) {
    result_.events.push_back(
        {comm_.rank(), track, stream_, name, start - options_.start_s, end - options_.start_s, bytes, flops});
  }

  std::vector<kernels::AttentionTask> tasks_of(const std::vector<AttentionItem>& items) const {
    std::vector<kernels::AttentionTask> tasks;
    tasks.reserve(items.size());
    for (const auto& item : items) tasks.push_back(kernels::task_from_item(item, plan_.documents.at(item.doc)));
    return tasks;
  }

  template <class U>
  kernels::HeadTensor<const U> in(int buffer) {
    return buffers_.view<U>(buffer);
  }

  void timed_attention(const char* name, double flops, const auto& call) {
    const double cpu0 = thread_cpu_s(), t0 = Communicator::now_s();
    call();
    const double t1 = Communicator::now_s();
    result_.summary.attention_s += t1 - t0;
    result_.summary.attention_cpu_s += thread_cpu_s() - cpu0;
    result_.summary.flops += flops;
    record(Track::kCompute, name, t0, t1, 0, flops);
  }

  void step(const Attention& a) {
    const auto tasks = tasks_of(a.items);
    timed_attention("attention", kernels::forward_flops(tasks, shape_), [&] {
      kernels::attention_forward<T>(tasks, shape_, in<T>(a.q), in<T>(a.k), in<T>(a.v), buffers_.view<T>(a.o),
                                    buffers_.view<float>(a.lse));
    });
  }

  void step(const AttentionBackward& a) {
    const auto tasks = tasks_of(a.items);
    timed_attention("attention-backward", kBackwardFlopsFactor * kernels::forward_flops(tasks, shape_), [&] {
      kernels::attention_backward<T>(tasks, shape_, in<T>(a.q), in<T>(a.k), in<T>(a.v), in<T>(a.o), in<T>(a.d_o),
                                     in<float>(a.lse), buffers_.view<float>(a.dq), buffers_.view<float>(a.dk),
                                     buffers_.view<float>(a.dv));
    });
  }

  // Slices of some heads are rows x a contiguous part of each row: copies and sums go row by row (one
  // block for whole rows), and a merge works on dense copies of its slices (in place for whole rows).
  void step(const Copy& c) {
    const double t0 = Communicator::now_s();
    const auto src = buffers_.runs(c.src), dst = buffers_.runs(c.dst);
    FULCRUM_CHECK(src.run_bytes == dst.run_bytes && src.rows == dst.rows, "copy between slices of different sizes");
    if (src.contiguous() && dst.contiguous()) {
      if (src.rows > 0) std::memcpy(dst.first, src.first, buffers_.bytes(c.src));
    } else {
      for (Tokens i = 0; i < src.rows; ++i) std::memcpy(dst.at(i), src.at(i), src.run_bytes);
    }
    finish_other("copy", t0, 2.0 * static_cast<double>(buffers_.bytes(c.src)));
  }

  void step(const Reduce& r) {
    const double t0 = Communicator::now_s();
    double bytes = static_cast<double>(buffers_.bytes(r.out));
    if (r.op == ReduceOp::kMerge) {
      std::vector<std::vector<std::byte>> scratch(2 * r.parts.size() + 2);
      std::vector<kernels::PartialResult<T>> parts;
      for (std::size_t i = 0; i < r.parts.size(); ++i) {
        parts.push_back({buffers_.dense_view<T>(r.parts[i], scratch[2 * i]),
                         buffers_.dense_view<float>(r.part_lse[i], scratch[2 * i + 1])});
        bytes += static_cast<double>(buffers_.bytes(r.parts[i]));
      }
      auto& out_scratch = scratch[scratch.size() - 2];
      auto& lse_scratch = scratch.back();
      kernels::merge_partials<T>(parts, buffers_.dense_view<T>(r.out, out_scratch),
                                 buffers_.dense_view<float>(r.out_lse, lse_scratch));
      if (!out_scratch.empty()) buffers_.scatter(r.out, out_scratch.data());
      if (!lse_scratch.empty()) buffers_.scatter(r.out_lse, lse_scratch.data());
    } else {
      const auto out = buffers_.runs(r.out);
      const std::size_t n = out.run_bytes / sizeof(float);
      for (const auto& part : r.parts) {
        const auto in = buffers_.runs(part);
        FULCRUM_CHECK(in.run_bytes == out.run_bytes && in.rows == out.rows, "sum of slices of different sizes");
        for (Tokens row = 0; row < out.rows; ++row) {
          auto* o = reinterpret_cast<float*>(out.at(row));
          const auto* x = reinterpret_cast<const float*>(in.at(row));
          for (std::size_t i = 0; i < n; ++i) o[i] += x[i];
        }
        bytes += static_cast<double>(buffers_.bytes(part));
      }
    }
    finish_other(r.op == ReduceOp::kMerge ? "merge" : "sum", t0, bytes);
  }

  void finish_other(const char* name, double t0, double bytes) {
    const double t1 = Communicator::now_s();
    result_.summary.other_compute_s += t1 - t0;
    record(Track::kCompute, name, t0, t1, bytes, 0);
  }

  // The wire form of a launch's messages. A whole-row slice is sent from (or received into) the buffer
  // itself; a slice of some heads goes through a contiguous staging block of the launch: gathered into it now
  // for a send, scattered from it when the wait returns for a receive.
  std::vector<WireMessage> wire(const std::vector<Message>& messages, bool send, Launch& state, double& total_bytes) {
    std::vector<WireMessage> out;
    out.reserve(messages.size());
    for (const auto& m : messages) {
      const std::size_t bytes = moves_data(plan_.mode) ? buffers_.bytes(m.slice) : 1;  // signal: 1 byte
      const auto runs = buffers_.runs(m.slice);
      void* data = runs.first;  // the slice's first byte (a one-row slice of some heads is contiguous too)
      if (moves_data(plan_.mode) && !runs.contiguous()) {
        auto& block = state.staging.emplace_back(bytes);  // its heap block stays put as the list grows
        if (send) {
          buffers_.gather(m.slice, block.data());
        } else {
          state.to_scatter.emplace_back(m.slice, state.staging.size() - 1);
        }
        data = block.data();
      }
      out.push_back({m.peer, m.tag, data, bytes});
      total_bytes += static_cast<double>(bytes);
    }
    return out;
  }

  void step(const CommLaunch& l) {
    Launch& state = launches_[l.id];
    state.sends = wire(l.sends, true, state, state.sent);
    state.receives = wire(l.receives, false, state, state.received);
    state.name = to_string(l.kind);
    state.stream = stream_;
    state.handle = comm_.launch(state.sends, state.receives);
    result_.summary.bytes_sent += state.sent;
    result_.summary.bytes_received += state.received;
  }

  void step(const CommWait& w) {
    auto it = launches_.find(w.launch);
    FULCRUM_CHECK(it != launches_.end(), "rank {}: wait for launch {} that was never started", comm_.rank(), w.launch);
    const double t0 = Communicator::now_s();
    const LaunchTimes times = comm_.wait(it->second.handle);
    for (const auto& [slice, block] : it->second.to_scatter) buffers_.scatter(slice, it->second.staging[block].data());
    const double t1 = Communicator::now_s();
    result_.launches.push_back({w.launch, times.launched_s, t0, t1, times.completed_s});
    record(Track::kCompute, "wait", t0, t1, 0, 0);
    const int stream = stream_;
    stream_ = it->second.stream;
    record(Track::kComm, it->second.name, times.launched_s, times.completed_s, it->second.sent + it->second.received,
           0);
    stream_ = stream;
    launches_.erase(it);
  }

  const Plan& plan_;
  const Program& program_;
  RankBuffers& buffers_;
  Communicator& comm_;
  ExecuteOptions options_;
  kernels::AttentionShape shape_;
  ExecutionResult result_;
  std::map<int, Launch> launches_;
  int stream_ = 0;
};

}  // namespace

PeerLaunches::PeerLaunches(const Plan& plan, int rank) {
  for (const auto& p : plan.programs) {
    for (const auto& i : p.instructions) {
      const auto* l = std::get_if<CommLaunch>(&i.op);
      if (!l) continue;
      for (const auto& m : l->sends) {
        if (rank < 0 || m.peer == rank) sides_.push_back({{m.peer, p.rank, m.tag, true}, l->id});
      }
      for (const auto& m : l->receives) {
        if (rank < 0 || m.peer == rank) sides_.push_back({{m.peer, p.rank, m.tag, false}, l->id});
      }
    }
  }
  // Stable: of two sides with one key (a plan verify_plan rejects), the later one wins, as before.
  std::stable_sort(sides_.begin(), sides_.end(), [](const Side& a, const Side& b) { return a.key < b.key; });
}

int PeerLaunches::launch(int rank, int peer, int tag, bool peer_sends) const {
  const std::tuple key{rank, peer, tag, peer_sends};
  const auto it =
      std::upper_bound(sides_.begin(), sides_.end(), key, [](const auto& k, const Side& side) { return k < side.key; });
  return it == sides_.begin() || std::prev(it)->key != key ? -1 : std::prev(it)->launch;
}

void attribute_waits(const Plan& plan, int rank, const std::vector<std::vector<double>>& launched_s,
                     ExecutionResult& result) {
  attribute_waits(plan, rank, launched_s, result, PeerLaunches(plan, rank));
}

void attribute_waits(const Plan& plan, int rank, const std::vector<std::vector<double>>& launched_s,
                     ExecutionResult& result, const PeerLaunches& peers) {
  // Which launch of each peer holds the other side of each of this rank's messages.
  auto peer_launch = [&](int peer, int tag, bool peer_sends) {
    const int id = peers.launch(rank, peer, tag, peer_sends);
    FULCRUM_CHECK(id >= 0, "rank {}: no launch of rank {} holds the other side of message {}", rank, peer, tag);
    return static_cast<std::size_t>(id);
  };
  std::map<int, const CommLaunch*> mine;
  for (const auto& i : plan.programs.at(rank).instructions) {
    if (const auto* l = std::get_if<CommLaunch>(&i.op)) mine[l->id] = l;
  }
  auto& s = result.summary;
  s.exposed_comm_s = s.peer_wait_s = 0;
  std::vector<std::pair<double, double>> in_flight;
  for (const auto& rec : result.launches) {
    double ready = rec.launched_s;
    const CommLaunch* l = mine.at(rec.id);
    for (const auto& m : l->receives)
      ready = std::max(ready, launched_s.at(m.peer).at(peer_launch(m.peer, m.tag, true)));
    for (const auto& m : l->sends) ready = std::max(ready, launched_s.at(m.peer).at(peer_launch(m.peer, m.tag, false)));
    s.peer_wait_s += std::max(0.0, std::min(rec.wait_end_s, ready) - rec.wait_start_s);
    s.exposed_comm_s += std::max(0.0, rec.wait_end_s - std::max(rec.wait_start_s, ready));
    // Done before its wait began: hidden, it ended at completion. Otherwise the program could use the
    // data only when its wait returned, so that ends it.
    const double end =
        rec.completed_s <= rec.wait_start_s ? rec.completed_s : std::max(rec.completed_s, rec.wait_end_s);
    in_flight.emplace_back(ready, std::max(ready, end));
  }
  s.comm_s = union_length(in_flight);
}

ExecutionResult execute(const Plan& plan, RankBuffers& buffers, Communicator& comm, const ExecuteOptions& options) {
  if (comm.rank() >= plan.ranks() || comm.size() != plan.ranks()) {
    fail("plan of {} ranks cannot run on rank {} of a job of {}", plan.ranks(), comm.rank(), comm.size());
  }
  try {
    if (plan.heads.dtype_bytes == 2) return Runner<kernels::BFloat16>(plan, buffers, comm, options).run();
    return Runner<float>(plan, buffers, comm, options).run();
  } catch (const std::exception& e) {
    // Receives this rank posted may still be pending into `buffers`, which the caller frees while the
    // exception unwinds: end the job first (MPI never returns; Local stops every peer from matching).
    comm.abort(e.what());
    throw;
  }
}

}  // namespace fulcrum::runtime
