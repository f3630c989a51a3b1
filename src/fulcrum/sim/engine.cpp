#include "fulcrum/sim/engine.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/cost/attention_cost.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <queue>
#include <tuple>
#include <utility>

namespace fulcrum::sim {
namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();
constexpr double kDoneBytes = 1e-6;  // a flow with no more than this to move arrives as it starts

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
  double bytes_left = 0;  // at updated_s
  double start_s = 0;     // both sides posted, plus the link's latency
  double rate = 0;        // bytes/s while active
  bool inter = false;     // crosses nodes
  bool active = false;
  bool done = false;
  double updated_s = 0;  // when bytes_left was last brought up to date
  int version = 0;       // of its scheduled arrival (older entries in the queue are stale)
};

struct LaunchState {
  double launched_s = 0;
  int outstanding = 0;
  double completed_s = -1;
  CommKind kind = CommKind::kDispatch;
  int stream = 0;
};

// The compute instruction a rank is running: its remaining work in seconds at full speed, as of
// updated_s, and the rate it runs at since then.
struct Running {
  bool active = false;
  double work_left_s = 0, work_s = 0, start_s = 0, bytes = 0, flops = 0;
  const char* name = "";
  int stream = 0;
  double rate = 1, updated_s = 0;
  int version = 0;  // of its scheduled end
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

// A moment something is due: a compute's end, a flow's start or arrival (id: rank or flow). Entries
// whose version is no longer the subject's were rescheduled and are skipped.
struct Due {
  double time = 0;
  int id = 0;
  int version = 0;
  bool operator>(const Due& other) const { return std::tie(time, id) > std::tie(other.time, other.id); }
};
using DueQueue = std::priority_queue<Due, std::vector<Due>, std::greater<>>;

// The event loop touches only what an event concerns: the ranks whose compute ended or whose wait was
// answered, the flows that start or arrive, and the flows sharing a port with those (their fair share
// changed). Progress is kept lazily (a compute's work left and a flow's bytes left are brought up to
// date only when their rate changes), and every end is scheduled in a priority queue, so an event costs
// what it changes, not the number of ranks: scanning every rank at every event made large jobs
// quadratic (16,384 GPUs took minutes).
class Engine {
 public:
  Engine(const Plan& plan, const HardwareModel& hw, const SimOptions& options)
      : plan_(plan),
        hw_(hw),
        options_(options),
        ranks_(plan.programs.size()),
        node_active_(ranks_.size() / static_cast<std::size_t>(std::max(hw.devices_per_node, 1)) + 1, 0),
        port_flows_(4 * ranks_.size()),
        peers_(plan) {}

  SimResult run() {
    for (int r = 0; r < static_cast<int>(ranks_.size()); ++r) ready_.push_back(r);
    double now = 0;
    for (;;) {
      issue_ready_instructions(now);
      const double next = next_event();
      if (next == kNever) break;
      now = next;
      finish_computes(now);
      finish_flows(now);
      update_rates(now);
    }
    SimResult out;
    out.rank_visits = rank_visits_;
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
      runtime::attribute_waits(plan_, static_cast<int>(r), launched, res, peers_);
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

  // Runs every rank that may move as far as it can at time `now` (ranks by index): zero-time
  // instructions, and the start of the next compute instruction (which keeps the rank busy until it
  // ends). A rank may move only after its compute ended or its wait was answered.
  void issue_ready_instructions(double now) {
    std::sort(ready_.begin(), ready_.end());
    ready_.erase(std::unique(ready_.begin(), ready_.end()), ready_.end());
    const std::vector<int> ready = std::exchange(ready_, {});
    rank_visits_ += ready.size();
    for (int r : ready) {
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
        start_compute(r, {true, seconds, seconds, now, 0, 0, "linear", 0}, now);
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
      std::tie(seconds, flops) = attention_call(a->items, false);
    } else if (const auto* b = std::get_if<AttentionBackward>(&in.op)) {
      std::tie(seconds, flops) = attention_call(b->items, true);
    } else if (const auto* c = std::get_if<Copy>(&in.op)) {
      bytes = 2 * slice_bytes(r, c->src);  // read and write
      seconds = hw_.overheads.call_s + hw_.copy_s(bytes);
    } else if (const auto* red = std::get_if<Reduce>(&in.op)) {
      bytes = slice_bytes(r, red->out) * static_cast<double>(red->parts.size() + 1);
      for (const auto& lse : red->part_lse) bytes += slice_bytes(r, lse);
      seconds = hw_.overheads.call_s + hw_.copy_s(bytes);
    }
    if (flops > 0) {
      s.attention_cpu_s += seconds;  // the work itself; attention_s is the wall time, shared compute included
      s.flops += flops;
    }
    start_compute(r, {true, seconds, seconds, now, bytes, flops, name, in.stream}, now);
  }

  // Seconds and FLOPs of one attention call (backward: its FLOPs, 2.5x the forward's), each item's
  // shape worked out once, and the call's fixed costs.
  std::pair<double, double> attention_call(const std::vector<AttentionItem>& items, bool backward) const {
    double seconds = hw_.overheads.attention_call_s(items.size(), backward), flops = 0;
    for (const auto& item : items) {
      const ItemShape shape = item_shape(plan_, item);
      seconds += backward ? hw_.attention_backward_s(shape.q_len, item.keys.count, kBackwardFlopsFactor * shape.flops)
                          : hw_.attention_forward_s(shape.q_len, item.keys.count, shape.flops);
      flops += shape.flops;
    }
    return {seconds, backward ? kBackwardFlopsFactor * flops : flops};
  }

  // When something `left` seconds from `now` is due; never before now (work brought up to date can be
  // a rounding error below zero).
  static double due_at(double now, double left) { return left > 0 ? now + left : now; }

  bool shared_compute() const { return hw_.compute_slots_per_node > 0; }
  int node_of(int r) const { return r / hw_.devices_per_node; }

  // How fast rank r's compute runs: full speed, or its share of a node's compute slots (ranks that
  // oversubscribe the cores of one machine, as cpu-local describes).
  double compute_rate(int r) const {
    if (!shared_compute()) return 1.0;
    return std::min(1.0, static_cast<double>(hw_.compute_slots_per_node) / std::max(1, node_active_[node_of(r)]));
  }

  // Brings the work left of rank r's compute up to `now` at its old rate, then runs it at `rate` and
  // schedules its end.
  void reschedule_compute(int r, double rate, double now) {
    Running& c = ranks_[r].compute;
    c.work_left_s -= c.rate * (now - c.updated_s);
    c.updated_s = now;
    c.rate = rate;
    computes_due_.push({due_at(now, c.work_left_s / c.rate), r, ++c.version});
  }

  // A node's compute slots are shared by its busy ranks: when one starts or ends, the others' speed changes.
  void node_rates_changed(int r, double now) {
    const int node = node_of(r);
    const int last = std::min<int>(static_cast<int>(ranks_.size()), (node + 1) * hw_.devices_per_node);
    for (int other = node * hw_.devices_per_node; other < last; ++other) {
      if (other != r && ranks_[other].compute.active) reschedule_compute(other, compute_rate(other), now);
    }
  }

  void start_compute(int r, Running running, double now) {
    running.version = ranks_[r].compute.version;  // a rank's versions only grow: its old entries stay stale
    ranks_[r].compute = running;
    if (shared_compute()) ++node_active_[node_of(r)];
    ranks_[r].compute.rate = compute_rate(r);
    ranks_[r].compute.updated_s = now;
    reschedule_compute(r, compute_rate(r), now);
    if (shared_compute()) node_rates_changed(r, now);
  }

  // Computes whose end is due finish, ranks by index.
  void finish_computes(double now) {
    std::vector<int> finished;
    while (!computes_due_.empty() && computes_due_.top().time <= now) {
      const Due due = computes_due_.top();
      computes_due_.pop();
      const Running& c = ranks_[due.id].compute;
      if (c.active && c.version == due.version) finished.push_back(due.id);
    }
    std::sort(finished.begin(), finished.end());
    for (int r : finished) {
      Running& c = ranks_[r].compute;
      c.active = false;
      auto& s = ranks_[r].result.summary;
      (c.flops > 0 ? s.attention_s : s.other_compute_s) += now - c.start_s;
      record(r, runtime::Track::kCompute, c.stream, c.name, c.start_s, now, c.bytes, c.flops);
      ready_.push_back(r);
      if (shared_compute()) {
        --node_active_[node_of(r)];
        node_rates_changed(r, now);
      }
    }
  }

  void launch(int r, const CommLaunch& l, double now) {
    RankState& st = ranks_[r];
    LaunchState& ls = st.launches[l.id];
    ls.launched_s = now;
    ls.outstanding = static_cast<int>(l.sends.size() + l.receives.size());
    if (ls.outstanding == 0) ls.completed_s = now;
    ls.kind = l.kind;
    ls.stream = stream_of(r);
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
    const auto posted = posted_.try_emplace({src, dst, tag}).first;
    Posted& p = posted->second;
    (send ? p.send_launch : p.recv_launch) = launch_id;
    (send ? p.send_s : p.recv_s) = now;
    if (p.send_launch < 0 || p.recv_launch < 0) return;
    const auto key = std::make_tuple(src, dst, p.send_launch, p.recv_launch);
    const double start_s = std::max(p.send_s, p.recv_s);
    posted_.erase(posted);  // matched: only messages with one side posted are kept
    const auto open = open_flows_.find(key);
    if (open != open_flows_.end() && open_flow_time_ == now) {
      Flow& f = flows_[open->second];
      if (f.active) {  // a zero-latency flow already moving: its arrival moves with the added bytes
        f.bytes_left -= f.rate * (now - f.updated_s);
        f.updated_s = now;
      }
      f.bytes_left += bytes;
      ++f.messages;
      if (f.active && f.rate > 0) flows_due_.push({due_at(now, f.bytes_left / f.rate), open->second, ++f.version});
      return;
    }
    if (open_flow_time_ != now) open_flows_.clear();
    open_flow_time_ = now;
    const bool inter = src / hw_.devices_per_node != dst / hw_.devices_per_node;
    const LinkSpec& link = hw_.link(src, dst);
    const int id = static_cast<int>(flows_.size());
    open_flows_[key] = id;
    flows_.push_back({src, dst, std::get<2>(key), std::get<3>(key), 1, bytes, start_s + link.latency_s, 0, inter, false,
                      false, 0, 0});
    starts_due_.push({flows_.back().start_s, id, 0});
  }

  bool try_finish_wait(int r, int stream, double now) {
    RankState& st = ranks_[r];
    const LaunchState& ls = st.launches.at(st.waiting);
    if (ls.completed_s < 0) return false;
    record(r, runtime::Track::kCompute, stream, "wait", st.wait_start, now, 0, 0);
    record(r, runtime::Track::kComm, ls.stream, to_string(ls.kind), ls.launched_s, ls.completed_s, 0, 0);
    st.result.launches.push_back({st.waiting, ls.launched_s, st.wait_start, now, ls.completed_s});
    st.waiting = -1;
    ++st.pc;
    ready_.push_back(r);
    return true;
  }

  // The earliest moment anything is due, dropping rescheduled entries on the way.
  double next_event() {
    while (!computes_due_.empty()) {
      const Due& due = computes_due_.top();
      const Running& c = ranks_[due.id].compute;
      if (c.active && c.version == due.version) break;
      computes_due_.pop();
    }
    while (!flows_due_.empty()) {
      const Due& due = flows_due_.top();
      const Flow& f = flows_[due.id];
      if (f.active && f.version == due.version) break;
      flows_due_.pop();
    }
    double next = kNever;
    if (!computes_due_.empty()) next = std::min(next, computes_due_.top().time);
    if (!starts_due_.empty()) next = std::min(next, starts_due_.top().time);
    if (!flows_due_.empty()) next = std::min(next, flows_due_.top().time);
    return next;
  }

  // Egress and ingress ports: (device, direction, intra/inter).
  std::size_t egress(const Flow& f) const { return static_cast<std::size_t>(f.src) + (f.inter ? ranks_.size() : 0); }
  std::size_t ingress(const Flow& f) const {
    return 2 * ranks_.size() + static_cast<std::size_t>(f.dst) + (f.inter ? ranks_.size() : 0);
  }

  // Flows whose latency has passed become active; those with nothing left and those due arrive, in
  // creation order (so the order is deterministic). Their ports' shares change.
  void finish_flows(double now) {
    std::vector<int> finished;
    while (!starts_due_.empty() && starts_due_.top().time <= now) {
      const int i = starts_due_.top().id;
      starts_due_.pop();
      Flow& f = flows_[i];
      f.active = true;
      f.updated_s = now;
      for (std::size_t port : {egress(f), ingress(f)}) {
        port_flows_[port].push_back(i);
        changed_ports_.push_back(port);
      }
      if (f.bytes_left <= kDoneBytes) finished.push_back(i);
    }
    while (!flows_due_.empty() && flows_due_.top().time <= now) {
      const Due due = flows_due_.top();
      flows_due_.pop();
      const Flow& f = flows_[due.id];
      if (f.active && f.version == due.version) finished.push_back(due.id);
    }
    std::sort(finished.begin(), finished.end());
    finished.erase(std::unique(finished.begin(), finished.end()), finished.end());
    for (int i : finished) {
      Flow& f = flows_[i];
      f.active = false;
      f.done = true;
      for (std::size_t port : {egress(f), ingress(f)}) {
        auto& list = port_flows_[port];
        list.erase(std::find(list.begin(), list.end(), i));
        changed_ports_.push_back(port);
      }
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

  // Fair sharing: each active flow gets the smaller of its egress and ingress port's equal share. Only
  // flows on a port whose flows changed can change rate; each one that does has the bytes it moved at
  // the old rate taken off, and its arrival rescheduled.
  void update_rates(double now) {
    std::sort(changed_ports_.begin(), changed_ports_.end());
    changed_ports_.erase(std::unique(changed_ports_.begin(), changed_ports_.end()), changed_ports_.end());
    for (std::size_t port : changed_ports_) {
      for (int i : port_flows_[port]) {
        Flow& f = flows_[i];
        const double bw = (f.inter ? hw_.inter_node : hw_.intra_node).bandwidth_bytes_per_s;
        const auto sharing = std::max(port_flows_[egress(f)].size(), port_flows_[ingress(f)].size());
        const double rate = bw / static_cast<double>(sharing);
        if (rate == f.rate) continue;
        f.bytes_left -= f.rate * (now - f.updated_s);
        f.updated_s = now;
        f.rate = rate;
        flows_due_.push({due_at(now, f.bytes_left / f.rate), i, ++f.version});
      }
    }
    changed_ports_.clear();
  }

  struct Posted {
    int send_launch = -1, recv_launch = -1;
    double send_s = 0, recv_s = 0;
  };

  const Plan& plan_;
  const HardwareModel& hw_;
  SimOptions options_;
  std::vector<RankState> ranks_;
  std::vector<int> ready_;  // ranks that may issue at the next pass
  std::size_t rank_visits_ = 0;
  std::vector<int> node_active_;  // busy ranks per node (shared compute slots only)
  std::vector<Flow> flows_;
  DueQueue computes_due_, starts_due_, flows_due_;
  std::vector<std::vector<int>> port_flows_;  // active flows per port (egress(), ingress())
  std::vector<std::size_t> changed_ports_;
  std::map<std::tuple<int, int, int, int>, int> open_flows_;  // flows opened at open_flow_time_
  double open_flow_time_ = -1;
  std::map<std::tuple<int, int, int>, Posted> posted_;
  runtime::PeerLaunches peers_;
};

}  // namespace

double attention_call_s(const Plan& plan, const std::vector<AttentionItem>& items, const HardwareModel& hardware,
                        bool backward) {
  double seconds = hardware.overheads.attention_call_s(items.size(), backward);
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
