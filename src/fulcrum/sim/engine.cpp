#include "fulcrum/sim/engine.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/cost/attention_cost.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <tuple>

namespace fulcrum::sim {
namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();
constexpr double kDoneBytes = 1e-6;     // a flow with less left than this has arrived (rounding of rate x time)
constexpr double kDoneSeconds = 1e-12;  // likewise for compute work, relative to the instruction's length

// What an item costs: its query rows and forward FLOPs (cost/: its heads, each under its own mask).
struct ItemShape {
  Tokens q_len = 0;
  double flops = 0;
};

ItemShape item_shape(const Plan& plan, const AttentionItem& item) {
  const auto& doc = plan.documents.at(item.doc);
  const Range keys{item.keys.position, item.keys.position + item.keys.count};
  std::vector<Range> queries;
  ItemShape shape;
  for (const auto& q : item.queries) {
    if (q.count == 0) continue;
    shape.q_len += q.count;
    queries.push_back({q.position, q.position + q.count});
  }
  shape.flops = attention_forward_flops(plan.heads.head_dim, plan.heads.q_heads,
                                        mask_runs(doc.mask, doc.head_masks, item.heads), queries, keys, doc.length);
  return shape;
}

// The messages one launch sends to one peer's launch, matched at the same moment, move as one flow
// (as an all-to-all moves one buffer per peer); `messages` of them complete together.
struct Flow {
  int src = 0, dst = 0;
  int send_launch = 0, recv_launch = 0;
  int messages = 0;
  double bytes_left = 0;
  double start_s = 0;  // both sides posted, plus the link's latency
  double rate = 0;     // bytes/s while active
  bool inter = false;  // crosses nodes
  bool done = false;
};

struct LaunchState {
  double launched_s = 0;
  int outstanding = 0;
  double completed_s = -1;
};

// The compute instruction a rank is running: its remaining work in seconds at full speed.
struct Running {
  bool active = false;
  double work_left_s = 0, work_s = 0, start_s = 0, bytes = 0, flops = 0;
  const char* name = "";
  int stream = 0;
};

struct RankState {
  std::size_t pc = 0;
  std::size_t next_extra = 0;  // into SimOptions::extra_compute[rank]
  Running compute;
  int waiting = -1;  // the launch a CommWait blocks on
  double wait_start = 0;
  bool done = false;
  double end_s = 0;
  std::map<int, LaunchState> launches;
  runtime::ExecutionResult result;
};

class Engine {
 public:
  Engine(const Plan& plan, const HardwareModel& hw, const SimOptions& options)
      : plan_(plan), hw_(hw), options_(options), ranks_(plan.programs.size()) {}

  SimResult run() {
    double now = 0;
    for (;;) {
      issue_ready_instructions(now);
      const double next = next_event(now);
      if (next == kNever) break;
      advance(now, next);
      now = next;
      finish_computes(now);
      finish_flows(now);
      update_rates(now);
    }
    SimResult out;
    std::vector<std::vector<double>> launched(ranks_.size());
    for (std::size_t r = 0; r < ranks_.size(); ++r) {
      if (!ranks_[r].done) {
        fail_runtime("simulated rank {} never finishes: blocked at instruction {} (a deadlock)", r, ranks_[r].pc);
      }
      int ids = 0;
      for (const auto& [id, l] : ranks_[r].launches) ids = std::max(ids, id + 1);
      launched[r].assign(static_cast<std::size_t>(ids), -1.0);
      for (const auto& [id, l] : ranks_[r].launches) launched[r][id] = l.launched_s;
    }
    for (std::size_t r = 0; r < ranks_.size(); ++r) {
      auto& res = ranks_[r].result;
      res.summary.total_s = ranks_[r].end_s;
      runtime::attribute_waits(plan_, static_cast<int>(r), launched, res);
      out.makespan_s = std::max(out.makespan_s, ranks_[r].end_s);
      out.ranks.push_back(std::move(res));
    }
    return out;
  }

 private:
  // What a slice moves or touches: its rows times its heads (a head-sliced message is only those bytes).
  double slice_bytes(int rank, const Slice& s) const {
    return static_cast<double>(plan_.heads.bytes(plan_.programs[rank].buffers[s.buffer].field, s));
  }

  void record(int rank, runtime::Track track, int stream, const char* name, double start, double end, double bytes,
              double flops) {
    ranks_[rank].result.events.push_back({rank, track, stream, name, start, end, bytes, flops});
  }

  // Runs every rank as far as it can at time `now`: zero-time instructions, and the start of the next
  // compute instruction (which keeps the rank busy until it ends).
  void issue_ready_instructions(double now) {
    for (int r = 0; r < static_cast<int>(ranks_.size()); ++r) {
      RankState& st = ranks_[r];
      const auto& instructions = plan_.programs[r].instructions;
      while (!st.done && st.waiting < 0 && !st.compute.active) {
        if (start_extra_compute(r, now)) break;
        if (st.pc == instructions.size()) {
          st.done = true;
          st.end_s = now;
          break;
        }
        const Instruction& in = instructions[st.pc];
        if (const auto* l = std::get_if<CommLaunch>(&in.op)) {
          launch(r, *l, now);
        } else if (const auto* w = std::get_if<CommWait>(&in.op)) {
          st.waiting = w->launch;
          st.wait_start = now;
          if (!try_finish_wait(r, in.stream, now)) break;
          continue;  // try_finish_wait advanced pc
        } else {
          compute(r, in, now);
        }
        ++st.pc;
      }
    }
  }

  // The caller's work scheduled before instruction pc (SimOptions::extra_compute), if any is due.
  bool start_extra_compute(int r, double now) {
    RankState& st = ranks_[r];
    if (static_cast<std::size_t>(r) >= options_.extra_compute.size()) return false;
    const auto& extra = options_.extra_compute[r];
    while (st.next_extra < extra.size() && extra[st.next_extra].before_instruction == st.pc) {
      const double seconds = extra[st.next_extra++].seconds;
      if (seconds > 0) {
        st.compute = {true, seconds, seconds, now, 0, 0, "linear", 0};
        return true;
      }
    }
    return false;
  }

  void compute(int r, const Instruction& in, double now) {
    RankState& st = ranks_[r];
    auto& s = st.result.summary;
    double seconds = 0, bytes = 0, flops = 0;
    const char* name = operation_name(in.op);
    if (const auto* a = std::get_if<Attention>(&in.op)) {
      seconds = attention_call_s(plan_, a->items, hw_, false);
      flops = attention_flops(a->items);
    } else if (const auto* b = std::get_if<AttentionBackward>(&in.op)) {
      seconds = attention_call_s(plan_, b->items, hw_, true);
      flops = kBackwardFlopsFactor * attention_flops(b->items);
    } else if (const auto* c = std::get_if<Copy>(&in.op)) {
      bytes = 2 * slice_bytes(r, c->src);  // read and write
      seconds = hw_.copy_s(bytes);
    } else if (const auto* red = std::get_if<Reduce>(&in.op)) {
      bytes = slice_bytes(r, red->out) * static_cast<double>(red->parts.size() + 1);
      for (const auto& lse : red->part_lse) bytes += slice_bytes(r, lse);
      seconds = hw_.copy_s(bytes);
    }
    if (flops > 0) {
      s.attention_cpu_s += seconds;  // the work itself; attention_s is the wall time, shared compute included
      s.flops += flops;
    }
    st.compute = {true, seconds, seconds, now, bytes, flops, name, in.stream};
  }

  // How fast rank r's compute runs: full speed, or its share of a node's compute slots (ranks that
  // oversubscribe the cores of one machine, as cpu-local describes).
  double compute_rate(int r) const {
    if (hw_.compute_slots_per_node <= 0) return 1.0;
    const int node = r / hw_.devices_per_node;
    int active = 0;
    for (int other = node * hw_.devices_per_node;
         other < std::min<int>(static_cast<int>(ranks_.size()), (node + 1) * hw_.devices_per_node); ++other) {
      active += ranks_[other].compute.active ? 1 : 0;
    }
    return std::min(1.0, static_cast<double>(hw_.compute_slots_per_node) / std::max(1, active));
  }

  void finish_computes(double now) {
    for (int r = 0; r < static_cast<int>(ranks_.size()); ++r) {
      Running& c = ranks_[r].compute;
      const bool finished =
          c.work_left_s <= kDoneSeconds * std::max(1.0, c.work_s) || now + c.work_left_s / compute_rate(r) <= now;
      if (!c.active || !finished) continue;
      c.active = false;
      auto& s = ranks_[r].result.summary;
      (c.flops > 0 ? s.attention_s : s.other_compute_s) += now - c.start_s;
      record(r, runtime::Track::kCompute, c.stream, c.name, c.start_s, now, c.bytes, c.flops);
    }
  }

  double attention_flops(const std::vector<AttentionItem>& items) const {
    double flops = 0;
    for (const auto& item : items) flops += item_shape(plan_, item).flops;
    return flops;
  }

  void launch(int r, const CommLaunch& l, double now) {
    RankState& st = ranks_[r];
    LaunchState& ls = st.launches[l.id];
    ls.launched_s = now;
    ls.outstanding = static_cast<int>(l.sends.size() + l.receives.size());
    if (ls.outstanding == 0) ls.completed_s = now;
    launch_kind_[{r, l.id}] = l.kind;
    launch_stream_[{r, l.id}] = stream_of(r);
    for (const auto& m : l.sends) {
      const double bytes = moves_data(plan_.mode) ? slice_bytes(r, m.slice) : 1.0;  // signal: 1 byte
      st.result.summary.bytes_sent += bytes;
      post(r, m.peer, m.tag, l.id, true, bytes, now);
    }
    for (const auto& m : l.receives) {
      const double bytes = moves_data(plan_.mode) ? slice_bytes(r, m.slice) : 1.0;  // signal: 1 byte
      st.result.summary.bytes_received += bytes;
      post(m.peer, r, m.tag, l.id, false, bytes, now);
    }
  }

  int stream_of(int r) const { return plan_.programs[r].instructions[ranks_[r].pc].stream; }

  // One side of message (src -> dst, tag) is posted; with both posted it joins the flow between the two
  // launches that starts now (or opens it).
  void post(int src, int dst, int tag, int launch_id, bool send, double bytes, double now) {
    auto& p = posted_[{src, dst, tag}];
    (send ? p.send_launch : p.recv_launch) = launch_id;
    (send ? p.send_s : p.recv_s) = now;
    p.bytes = bytes;
    if (p.send_launch < 0 || p.recv_launch < 0) return;
    const auto key = std::make_tuple(src, dst, p.send_launch, p.recv_launch);
    const auto open = open_flows_.find(key);
    if (open != open_flows_.end() && open_flow_time_ == now) {
      flows_[open->second].bytes_left += bytes;
      ++flows_[open->second].messages;
      return;
    }
    if (open_flow_time_ != now) open_flows_.clear();
    open_flow_time_ = now;
    const bool inter = src / hw_.devices_per_node != dst / hw_.devices_per_node;
    const LinkSpec& link = hw_.link(src, dst);
    open_flows_[key] = static_cast<int>(flows_.size());
    waiting_flows_.push_back(static_cast<int>(flows_.size()));
    flows_.push_back({src, dst, p.send_launch, p.recv_launch, 1, bytes, std::max(p.send_s, p.recv_s) + link.latency_s,
                      0, inter, false});
  }

  bool try_finish_wait(int r, int stream, double now) {
    RankState& st = ranks_[r];
    const LaunchState& ls = st.launches.at(st.waiting);
    if (ls.completed_s < 0) return false;
    record(r, runtime::Track::kCompute, stream, "wait", st.wait_start, now, 0, 0);
    const auto kind = launch_kind_.at({r, st.waiting});
    record(r, runtime::Track::kComm, launch_stream_.at({r, st.waiting}), to_string(kind), ls.launched_s, ls.completed_s,
           0, 0);
    st.result.launches.push_back({st.waiting, ls.launched_s, st.wait_start, now, ls.completed_s});
    st.waiting = -1;
    ++st.pc;
    return true;
  }

  double next_event(double now) const {
    double next = kNever;
    for (int r = 0; r < static_cast<int>(ranks_.size()); ++r) {
      if (ranks_[r].compute.active) next = std::min(next, now + ranks_[r].compute.work_left_s / compute_rate(r));
    }
    for (int i : waiting_flows_) next = std::min(next, flows_[i].start_s);
    for (int i : active_flows_) {
      if (flows_[i].rate > 0) next = std::min(next, now + flows_[i].bytes_left / flows_[i].rate);
    }
    return next;
  }

  void advance(double now, double next) {
    std::vector<double> rates;
    rates.reserve(ranks_.size());
    for (int r = 0; r < static_cast<int>(ranks_.size()); ++r) rates.push_back(compute_rate(r));
    for (int r = 0; r < static_cast<int>(ranks_.size()); ++r) {
      if (ranks_[r].compute.active) ranks_[r].compute.work_left_s -= rates[r] * (next - now);
    }
    for (int i : active_flows_) flows_[i].bytes_left -= flows_[i].rate * (next - now);
  }

  // A flow has arrived when what is left is below rounding, or would take less time than `now` can
  // resolve (now + left / rate == now): without the second test, large clocks would stall on crumbs.
  static bool arrived(const Flow& f, double now) {
    return f.bytes_left <= kDoneBytes || (f.rate > 0 && now + f.bytes_left / f.rate <= now);
  }

  // Flows whose latency has passed become active; active flows with nothing left arrive, in creation
  // order (the lists stay sorted by index, so the order is deterministic).
  void finish_flows(double now) {
    std::vector<int> still_waiting, finished;
    for (int i : waiting_flows_) (flows_[i].start_s <= now ? active_flows_ : still_waiting).push_back(i);
    waiting_flows_ = std::move(still_waiting);
    std::sort(active_flows_.begin(), active_flows_.end());
    std::vector<int> still_active;
    for (int i : active_flows_) (arrived(flows_[i], now) ? finished : still_active).push_back(i);
    active_flows_ = std::move(still_active);
    for (int i : finished) {
      Flow& f = flows_[i];
      f.done = true;
      complete_side(f.src, f.send_launch, f.messages, now);
      complete_side(f.dst, f.recv_launch, f.messages, now);
    }
  }

  void complete_side(int r, int launch_id, int messages, double now) {
    RankState& st = ranks_[r];
    LaunchState& ls = st.launches.at(launch_id);
    ls.outstanding -= messages;
    if (ls.outstanding == 0) ls.completed_s = now;
    if (st.waiting == launch_id && ls.completed_s >= 0) {
      try_finish_wait(r, plan_.programs[r].instructions[st.pc].stream, now);
    }
  }

  // Fair sharing: each active flow gets the smaller of its egress and ingress port's equal share.
  // Ports are (device, direction, intra/inter): counted in flat arrays, as this runs at every event.
  void update_rates(double /*now*/) {
    const std::size_t n = ranks_.size();
    egress_.assign(2 * n, 0);
    ingress_.assign(2 * n, 0);
    auto port = [n](int device, bool inter) { return static_cast<std::size_t>(device) + (inter ? n : 0); };
    for (int i : active_flows_) {
      ++egress_[port(flows_[i].src, flows_[i].inter)];
      ++ingress_[port(flows_[i].dst, flows_[i].inter)];
    }
    for (int i : active_flows_) {
      Flow& f = flows_[i];
      const double bw = (f.inter ? hw_.inter_node : hw_.intra_node).bandwidth_bytes_per_s;
      f.rate = bw / std::max(egress_[port(f.src, f.inter)], ingress_[port(f.dst, f.inter)]);
    }
  }

  struct Posted {
    int send_launch = -1, recv_launch = -1;
    double send_s = 0, recv_s = 0, bytes = 0;
  };

  const Plan& plan_;
  const HardwareModel& hw_;
  SimOptions options_;
  std::vector<RankState> ranks_;
  std::vector<Flow> flows_;
  std::vector<int> waiting_flows_;  // matched, still in their latency
  std::vector<int> active_flows_;   // moving bytes
  std::vector<int> egress_, ingress_;
  std::map<std::tuple<int, int, int, int>, int> open_flows_;  // flows opened at open_flow_time_
  double open_flow_time_ = -1;
  std::map<std::tuple<int, int, int>, Posted> posted_;
  std::map<std::pair<int, int>, CommKind> launch_kind_;
  std::map<std::pair<int, int>, int> launch_stream_;
};

}  // namespace

double attention_call_s(const Plan& plan, const std::vector<AttentionItem>& items, const HardwareModel& hardware,
                        bool backward) {
  double seconds = 0;
  for (const auto& item : items) {
    const ItemShape shape = item_shape(plan, item);
    seconds += backward
                   ? hardware.attention_backward_s(shape.q_len, item.keys.count, kBackwardFlopsFactor * shape.flops)
                   : hardware.attention_forward_s(shape.q_len, item.keys.count, shape.flops);
  }
  return seconds;
}

SimResult simulate_plan(const Plan& plan, const HardwareModel& hardware, const SimOptions& options) {
  hardware.validate();
  if (options.extra_compute.size() > plan.programs.size()) {
    fail("extra_compute has {} ranks: the plan has {}", options.extra_compute.size(), plan.programs.size());
  }
  for (std::size_t r = 0; r < options.extra_compute.size(); ++r) {
    std::size_t previous = 0;
    for (const auto& e : options.extra_compute[r]) {
      if (e.before_instruction < previous || e.before_instruction > plan.programs[r].instructions.size() ||
          !(e.seconds >= 0)) {
        fail("extra_compute[{}]: entries must be sorted, before_instruction <= {}, seconds >= 0", r,
             plan.programs[r].instructions.size());
      }
      previous = e.before_instruction;
    }
  }
  return Engine(plan, hardware, options).run();
}

}  // namespace fulcrum::sim
