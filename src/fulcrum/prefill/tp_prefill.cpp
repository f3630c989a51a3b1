#include "fulcrum/prefill/tp_prefill.hpp"
#include "fulcrum/kernels/kernel_threads.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/kernels/attention.hpp"
#include "fulcrum/prefill/all_reduce.hpp"
#include "fulcrum/prefill/gemm.hpp"
#include "fulcrum/prefill/layer_weights.hpp"
#include "fulcrum/prefill/ops.hpp"
#include "fulcrum/prefill/weight_stream.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>

namespace fulcrum::prefill {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

using kernels::ScopedKernelThreads;

int as_int(std::size_t v) { return static_cast<int>(v); }
std::size_t sz(long v) { return static_cast<std::size_t>(v); }

double bytes_of(const AttentionWeights& w) {
  return static_cast<double>((w.norm.size() + w.wq.size() + w.wk.size() + w.wv.size() + w.wo.size()) * sizeof(float));
}
double bytes_of(const MlpWeights& w) {
  return static_cast<double>((w.norm.size() + w.gate.size() + w.up.size() + w.down.size()) * sizeof(float));
}

// A rank's activations of one layer, sized once for the widest layer.
struct Buffers {
  std::vector<float> x, normed, partial;  // [T][hidden]
  std::vector<float> q, o, lse, k, v;     // local slots / groups
  std::vector<float> gate, up;            // [T][ffn rows]
};

class RankPrefillRun {
 public:
  RankPrefillRun(const PrefillSpec& spec, const PrefillOptions& options, runtime::Communicator& comm)
      : spec_(spec),
        options_(options),
        comm_(comm),
        shape_(spec.shape),
        t_(static_cast<int>(spec.tokens)),
        d_(shape_.head_dim),
        file_(options.weights_path, shape_),
        ffn_(ffn_rows(shape_.ffn_hidden, comm.size(), comm.rank())) {
    for (const auto& layer : spec.assignment) heads_.push_back(rank_heads(layer, shape_, comm.rank()));
  }

  RankPrefill run() {
    RankPrefill out;
    out.layers.resize(sz(shape_.layers));
    b_.x = prompt_hidden_states(shape_, spec_.tokens, spec_.seed);
    b_.normed.resize(b_.x.size());
    b_.partial.resize(b_.x.size());
    std::vector<float> final_norm(sz(shape_.hidden));
    file_.read_rows(shape_.layers, WeightTensor::kAttnNorm, 0, 1, final_norm.data());

    WeightStream stream(
        2 * shape_.layers,
        [this](int part, WeightPart& into) {
          const int layer = part / 2;
          if (part == options_.fail_read_part) {
            fail_runtime("{}: reading layer {} {} weights failed (injected)", file_.path(), layer,
                         part % 2 == 0 ? "attention" : "MLP");
          }
          if (part % 2 == 0) {
            load_attention(file_, layer, d_, heads_[sz(layer)], options_.wpr, into.attention);
          } else {
            load_mlp(file_, layer, ffn_, into.mlp);
          }
        },
        options_.cpip);

    comm_.barrier();  // every rank starts the clock together: layer times compare across ranks
    const auto start = Clock::now();
    for (int l = 0; l < shape_.layers; ++l) {
      LayerTimes& times = out.layers[sz(l)];
      double waited = 0;
      const WeightPart& attention = stream.acquire(2 * l, waited);
      times.prefetch_wait_s += waited;
      times.weight_bytes += bytes_of(attention.attention);
      attention_block(l, attention.attention, times);
      stream.release(2 * l);  // the reader moves on to layer l + 1's attention during the all-reduce and MLP
      add_all_reduced(times);

      const WeightPart& mlp = stream.acquire(2 * l + 1, waited);
      times.prefetch_wait_s += waited;
      times.weight_bytes += bytes_of(mlp.mlp);
      mlp_block(mlp.mlp, times);
      stream.release(2 * l + 1);
      add_all_reduced(times);
    }
    out.hidden.resize(b_.x.size());
    rms_norm(b_.x, final_norm, shape_.rms_norm_eps, out.hidden);
    out.total_s = since(start);
    return out;
  }

 private:
  void attention_block(int layer, const AttentionWeights& w, LayerTimes& times) {
    const RankHeads& heads = heads_[sz(layer)];
    const int hidden = shape_.hidden;
    const int groups = as_int(heads.groups.size());
    const int m = heads.slots_per_group;
    const int slots = heads.slots();
    const int q_ld = slots * d_, kv_ld = groups * d_;
    auto start = Clock::now();
    rms_norm(b_.x, w.norm, shape_.rms_norm_eps, b_.normed);
    if (slots == 0) {  // no head of this layer here: this rank only joins the all-reduce
      std::fill(b_.partial.begin(), b_.partial.end(), 0.0F);
      times.projection_s += since(start);
      return;
    }
    b_.q.assign(sz(t_) * sz(q_ld), 0.0F);  // unused slots stay zero (no task reads them)
    b_.o.resize(b_.q.size());
    b_.lse.resize(sz(t_) * sz(slots));
    b_.k.resize(sz(t_) * sz(kv_ld));
    b_.v.resize(b_.k.size());
    const float* x = b_.normed.data();
    const auto row = [&](long r) { return sz(r) * sz(hidden); };  // offset of weight row r
    if (w.reorganised) {
      // One GEMM per KV group into its slots; K and V of all groups in one GEMM each.
      for (int j = 0; j < groups; ++j) {
        const int first = heads.group_begin[sz(j)];
        gemm(true, t_, heads.count(sz(j)) * d_, hidden, x, hidden, w.wq.data() + row(long{first} * d_), hidden,
             b_.q.data() + sz(j) * sz(m * d_), q_ld, 0);
      }
      gemm(true, t_, kv_ld, hidden, x, hidden, w.wk.data(), hidden, b_.k.data(), kv_ld, 0);
      gemm(true, t_, kv_ld, hidden, x, hidden, w.wv.data(), hidden, b_.v.data(), kv_ld, 0);
    } else {
      // Each head's slice of the full matrices, one GEMM per head (per KV group for K and V).
      for (std::size_t i = 0; i < heads.heads.size(); ++i) {
        gemm(true, t_, d_, hidden, x, hidden, w.wq.data() + row(long{heads.heads[i]} * d_), hidden,
             b_.q.data() + sz(heads.slot(i)) * sz(d_), q_ld, 0);
      }
      for (int j = 0; j < groups; ++j) {
        const long g = heads.groups[sz(j)];
        gemm(true, t_, d_, hidden, x, hidden, w.wk.data() + row(g * d_), hidden, b_.k.data() + sz(j) * sz(d_), kv_ld,
             0);
        gemm(true, t_, d_, hidden, x, hidden, w.wv.data() + row(g * d_), hidden, b_.v.data() + sz(j) * sz(d_), kv_ld,
             0);
      }
    }
    apply_rope(b_.q, slots, d_, shape_.rope_theta);
    apply_rope(b_.k, groups, d_, shape_.rope_theta);
    times.projection_s += since(start);

    start = Clock::now();
    run_attention(layer, heads);
    times.attention_s += since(start);

    start = Clock::now();
    // partial = O · w_o rows of this rank's heads (summed over ranks by the all-reduce).
    if (w.reorganised) {
      for (int j = 0; j < groups; ++j) {
        const int first = heads.group_begin[sz(j)];
        gemm(false, t_, hidden, heads.count(sz(j)) * d_, b_.o.data() + sz(j) * sz(m * d_), q_ld,
             w.wo.data() + row(long{first} * d_), hidden, b_.partial.data(), hidden, j == 0 ? 0.0F : 1.0F);
      }
    } else {
      for (std::size_t i = 0; i < heads.heads.size(); ++i) {
        gemm(false, t_, hidden, d_, b_.o.data() + sz(heads.slot(i)) * sz(d_), q_ld,
             w.wo.data() + row(long{heads.heads[i]} * d_), hidden, b_.partial.data(), hidden, i == 0 ? 0.0F : 1.0F);
      }
    }
    times.projection_s += since(start);
  }

  // All of this rank's heads in one fused call: a task per KV group over its slots, each slot its head's mask.
  void run_attention(int layer, const RankHeads& heads) {
    const int groups = as_int(heads.groups.size());
    const int m = heads.slots_per_group;
    slot_masks_.assign(sz(heads.slots()), MaskSpec::causal());
    for (std::size_t i = 0; i < heads.heads.size(); ++i) {
      slot_masks_[sz(heads.slot(i))] = spec_.head_masks[sz(layer)][sz(heads.heads[i])];
    }
    std::vector<kernels::AttentionTask> tasks;
    for (int j = 0; j < groups; ++j) {
      kernels::AttentionTask task;
      task.queries[0] = RowSpan{0, 0, t_};
      task.keys = RowSpan{0, 0, t_};
      task.heads = HeadRange{j * m, j * m + heads.count(sz(j))};
      task.doc_len = t_;
      task.head_masks = slot_masks_;
      tasks.push_back(std::move(task));
    }
    kernels::AttentionShape shape;
    shape.q_heads = heads.slots();
    shape.kv_heads = groups;
    shape.head_dim = d_;
    using T = kernels::HeadTensor<float>;
    const T q{b_.q.data(), t_, shape.q_heads, d_}, k{b_.k.data(), t_, groups, d_}, v{b_.v.data(), t_, groups, d_};
    const T o{b_.o.data(), t_, shape.q_heads, d_}, lse{b_.lse.data(), t_, shape.q_heads, 1};
    kernels::attention_forward<float>(tasks, shape, q, k, v, o, lse);
  }

  void mlp_block(const MlpWeights& w, LayerTimes& times) {
    const auto start = Clock::now();
    const int hidden = shape_.hidden;
    const int f = static_cast<int>(ffn_.size());
    rms_norm(b_.x, w.norm, shape_.rms_norm_eps, b_.normed);
    b_.gate.resize(sz(t_) * sz(f));
    b_.up.resize(b_.gate.size());
    gemm(true, t_, f, hidden, b_.normed.data(), hidden, w.gate.data(), hidden, b_.gate.data(), f, 0);
    gemm(true, t_, f, hidden, b_.normed.data(), hidden, w.up.data(), hidden, b_.up.data(), f, 0);
    swiglu(b_.gate, b_.up);
    gemm(false, t_, hidden, f, b_.gate.data(), f, w.down.data(), hidden, b_.partial.data(), hidden, 0);
    times.mlp_s += since(start);
  }

  // x += the sum over ranks of `partial`.
  void add_all_reduced(LayerTimes& times) {
    const auto start = Clock::now();
    all_reduce_sum(comm_, b_.partial);
    times.all_reduce_s += since(start);
    for (std::size_t i = 0; i < b_.x.size(); ++i) b_.x[i] += b_.partial[i];
  }

  const PrefillSpec& spec_;
  const PrefillOptions& options_;
  runtime::Communicator& comm_;
  const ModelShape& shape_;
  int t_;
  int d_;
  WeightsFile file_;
  Range ffn_;
  std::vector<RankHeads> heads_;
  Buffers b_;
  std::vector<MaskSpec> slot_masks_;
};

}  // namespace

RankPrefill run_prefill_rank(const PrefillSpec& spec, const PrefillOptions& options, runtime::Communicator& comm) {
  spec.validate(comm.size());
  if (options.threads < 0 || options.threads > 1024) {
    fail("threads = {}: must be in [0, 1024] (0 = automatic)", options.threads);
  }
  const ScopedKernelThreads threads(options.threads > 0 ? options.threads
                                                        : std::max(1, omp_get_num_procs() / comm.size()));
  RankPrefillRun run(spec, options, comm);
  return run.run();
}

}  // namespace fulcrum::prefill
