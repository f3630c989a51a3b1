#include "fulcrum/studies/simulate_study.hpp"

#include "fulcrum/core/error.hpp"
#include "fulcrum/core/text.hpp"
#include "fulcrum/planners/baselines/perdoc_cp.hpp"
#include "fulcrum/workload/mask_kinds.hpp"
#include "fulcrum/workload/model_config.hpp"

#include <fmt/ranges.h>

#include <algorithm>
#include <limits>
#include <optional>

namespace fulcrum::studies {

using sim::cp_degree_for;
using sim::keeps_documents_whole;
using sim::ParallelConfig;
using sim::powers_of_two_dividing;
using sim::simulate_training;
using sim::training_planner_options;
using sim::TrainingConfig;
using sim::TrainingResult;

namespace {

// The sweep keys of the layout and the data; every planner option (planner_option_specs) is one too.
const std::vector<std::string> kLayoutKeys = {
    "gpus",  "tp",       "pp",   "cp",   "microbatches", "max-doc-len", "tokens-per-rank", "dataset", "mask",
    "model", "hardware", "seed", "mode", "iterations",   "warmup",      "recompute",       "zero1"};

std::vector<std::string> sweep_keys() {
  std::vector<std::string> keys = kLayoutKeys;
  for (const auto& spec : planner_option_specs()) keys.emplace_back(spec.name);
  return keys;
}

// A whole number of type T (its type's range in the error); the configuration checks the key's range later.
template <typename T>
T parse_whole_for(const std::string& text, const std::string& key) {
  const std::optional<T> v = parse_whole<T>(text);
  if (!v) {
    fail("{} = '{}': must be a whole number in [{}, {}]", key, text, std::numeric_limits<T>::min(),
         std::numeric_limits<T>::max());
  }
  return *v;
}

int parse_int(const std::string& text, const std::string& key) { return parse_whole_for<int>(text, key); }

double parse_double(const std::string& text, const std::string& key) {
  const std::optional<double> v = parse_whole<double>(text);
  if (!v) fail("{} = '{}': not a number", key, text);
  return *v;
}

void apply(StudySpec& spec, const std::string& key, const std::string& value) {
  TrainingConfig& c = spec.base;
  if (key == "gpus")
    c.parallel.gpus = parse_int(value, key);
  else if (key == "tp")
    c.parallel.tp = parse_int(value, key);
  else if (key == "pp")
    c.parallel.pp = parse_int(value, key);
  else if (key == "cp")
    c.parallel.cp = parse_int(value, key);
  else if (key == "microbatches")
    c.parallel.microbatches = parse_int(value, key);
  else if (key == "max-doc-len")
    c.max_doc_len = mask_detail::parse_tokens(value, key);
  else if (key == "tokens-per-rank")
    c.tokens_per_rank = mask_detail::parse_tokens(value, key);
  else if (key == "dataset")
    c.dataset = value;
  else if (key == "mask")
    c.mask = value;
  else if (key == "model")
    spec.model = value;
  else if (key == "hardware")
    spec.hardware = value;
  else if (key == "seed")
    c.seed = parse_whole_for<std::uint64_t>(value, key);
  else if (key == "mode")
    spec.modes = {parse_comm_mode(value, key)};
  else if (key == "iterations")
    c.iterations = parse_int(value, key);
  else if (key == "warmup")
    c.warmup_iterations = parse_int(value, key);
  else if (key == "recompute")
    c.memory.recompute = sim::parse_recompute(value, key);
  else if (key == "zero1")
    c.memory.zero1 = sim::parse_zero1(value, key);
  else
    c.planner_options.set(key, parse_double(value, key));  // fails naming unknown keys
}

}  // namespace

SweepAxis parse_sweep_axis(const std::string& text) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) {
    fail("sweep = '{}': must be KEY=V1,V2,... with KEY one of {}", text, fmt::join(sweep_keys(), ", "));
  }
  SweepAxis axis{text.substr(0, eq), {}};
  const auto keys = sweep_keys();
  if (std::find(keys.begin(), keys.end(), axis.key) == keys.end()) {
    fail("sweep key '{}': unknown; choose from {}", axis.key, fmt::join(keys, ", "));
  }
  for (auto v : split_fields(std::string_view(text).substr(eq + 1), ',')) {
    if (v.empty()) fail("sweep = '{}': empty value", text);
    axis.values.emplace_back(v);
  }
  return axis;
}

TrainingResult search_best(const TrainingConfig& config, const ModelShape& model, const HardwareModel& gpu,
                           bool search_pp) {
  const ParallelConfig& given = config.parallel;
  const double global_tokens = static_cast<double>(config.rank_tokens()) * given.dp() * given.microbatch_count();
  // auto's candidates each take their own CP degree (cp_degree_for).
  const bool uses_cp =
      !is_meta_planner(config.planner) && find_planner(config.planner).capabilities.cp_groups != CpGroups::kNone;
  TrainingResult best;
  bool found = false;
  for (int pp : search_pp ? powers_of_two_dividing(model.layers, 8) : std::vector<int>{given.pp}) {
    if (given.gpus % (given.tp * pp) != 0) continue;
    TrainingConfig c = config;
    if (search_pp) {
      c.parallel.pp = pp;
      c.parallel.microbatches = 0;
      const auto tokens = static_cast<Tokens>(global_tokens / (c.parallel.dp() * c.parallel.microbatch_count()));
      c.tokens_per_rank = std::max<Tokens>(16, tokens / 16 * 16);
    }
    // A micro-batch smaller than the longest document cuts it (packing carries the rest into the next
    // micro-batch as a new document), which removes attention work: a layout may not cut more than the
    // given one does, or it would win by computing less.
    const auto microbatch_tokens = [](const TrainingConfig& t) {
      return std::min<double>(static_cast<double>(t.max_doc_len),
                              static_cast<double>(t.rank_tokens()) * t.parallel.dp());
    };
    if (microbatch_tokens(c) < microbatch_tokens(config)) continue;
    std::vector<int> cps{cp_degree_for(c, model, gpu)};
    if (uses_cp && c.planner_options.values().contains(cp_degree_option().name)) {
      cps = {c.planner_options.get_int(cp_degree_option())};  // pinned by --cp-degree
    } else if (uses_cp) {
      cps.clear();
      for (int cp : powers_of_two_dividing(c.parallel.dp(), 64)) {
        if (keeps_documents_whole(c, model, gpu, cp)) cps.push_back(cp);
      }
      if (cps.empty()) {  // none keeps them whole: the default for this layout, not the given one's
        TrainingConfig fresh = c;
        fresh.parallel.cp = 0;
        cps.push_back(cp_degree_for(fresh, model, gpu));
      }
    }
    for (int cp : cps) {
      c.parallel.cp = cp;
      TrainingResult r = simulate_training(c, model, gpu);
      const bool fits = !r.memory.out_of_memory(), best_fits = found && !best.memory.out_of_memory();
      const bool better = !found || (fits && (!best_fits || r.tokens_per_s > best.tokens_per_s)) ||
                          (!fits && !best_fits && r.memory.total_bytes() < best.memory.total_bytes());
      if (better) best = std::move(r);
      found = true;
    }
  }
  if (!found) fail("search: no pp in 1..8 divides both the {} layers and gpus / tp", model.layers);
  return best;
}

std::string StudyRow::no_speedup_reason() const {
  if (speedup) return "";
  return result.memory.out_of_memory() ? "OOM" : "ref OOM";
}

Study run_study(const StudySpec& spec, const std::function<void(int, int)>& progress) {
  if (spec.planners.empty()) fail("planners: none given");
  if (spec.modes.empty()) fail("modes: none given");
  Study study{spec, {}, {}};
  study.reference = std::find(spec.planners.begin(), spec.planners.end(), spec.reference) != spec.planners.end()
                        ? spec.reference
                        : spec.planners.front();
  std::size_t runs_per_point = 0;
  for (const auto& planner : spec.planners) runs_per_point += overlaps_traffic(planner) ? spec.modes.size() : 1;
  // The grid's size is known before any run: a stated bound instead of hours of runs.
  std::size_t points = 1;
  for (std::size_t a = 0; a <= spec.sweep.size(); ++a) {
    if (a > 0) points *= spec.sweep[a - 1].values.size();
    if (points * runs_per_point > kMaxStudyRuns) {
      fail("sweep: {} points x {} planners and modes make over {} runs, the most a study does", points, runs_per_point,
           kMaxStudyRuns);
    }
  }
  const int total = static_cast<int>(points * runs_per_point);
  int done = 0;
  for (std::size_t p = 0; p < points; ++p) {
    StudySpec at = spec;
    std::vector<std::pair<std::string, std::string>> point;
    for (std::size_t i = 0, rest = p; i < spec.sweep.size(); ++i) {
      const auto& axis = spec.sweep[i];
      const auto& value = axis.values[rest % axis.values.size()];
      rest /= axis.values.size();
      apply(at, axis.key, value);
      point.emplace_back(axis.key, value);
    }
    const ModelShape model = resolve_model_shape(at.model);
    const HardwareModel gpu = load_hardware(at.hardware);
    const std::size_t first = study.rows.size();
    for (const auto& planner : spec.planners) {
      for (CommMode mode : overlaps_traffic(planner) ? at.modes : std::vector<CommMode>{spec.baseline_mode}) {
        TrainingConfig c = at.base;
        c.planner = planner;
        c.mode = mode;
        c.baseline_mode = spec.baseline_mode;
        if (!is_meta_planner(planner)) c.candidates.clear();
        c.parallel.validate_layout(gpu, model);  // cp_degree_for and search_best divide by its parts
        c.parallel.cp = cp_degree_for(c, model, gpu);
        study.rows.push_back(
            {point, spec.search ? search_best(c, model, gpu, spec.search_pp) : simulate_training(c, model, gpu), {}});
        if (progress) progress(++done, total);
      }
    }
    const StudyRow* reference = nullptr;  // DistCA as reference: its first mode
    for (std::size_t r = first; r < study.rows.size() && !reference; ++r) {
      if (study.rows[r].result.config.planner == study.reference) reference = &study.rows[r];
    }
    for (std::size_t r = first; r < study.rows.size(); ++r) {
      StudyRow& row = study.rows[r];
      if (!row.result.memory.out_of_memory() && !reference->result.memory.out_of_memory()) {
        row.speedup = row.result.tokens_per_s / reference->result.tokens_per_s;
      }
    }
  }
  return study;
}

}  // namespace fulcrum::studies
