// Small, fast training configurations shared by the simulator's tests and the studies' tests.
#pragma once

#include "fulcrum/cost/hardware_model.hpp"
#include "fulcrum/sim/training.hpp"

#include <string>

namespace fulcrum::sim::testing {

// Small, fast runs: the tiny model (2 layers, 2 kv heads) on h200-dgx nodes of 8 GPUs with tp 2, so a
// node holds 4 TP groups and 16 GPUs make 8 attention ranks, 2 nodes.
inline TrainingConfig small_config(const std::string& planner, int pp = 1) {
  TrainingConfig c;
  c.planner = planner;
  c.parallel = {.gpus = 16,
                .tp = 2,
                .pp = pp,
                .cp = find_planner(planner).capabilities.cp_groups == CpGroups::kWithinGroup ? 2 : 1,
                .microbatches = 0};
  c.dataset = "lognormal:7:1.5";
  c.max_doc_len = 8192;
  c.tokens_per_rank = 4096;
  c.iterations = 2;
  c.seed = 3;
  return c;
}

// Functions, not globals: the presets are themselves globals of another translation unit.
inline ModelShape tiny() { return model_shape_preset("tiny"); }
inline HardwareModel h200() { return hardware_preset("h200-dgx"); }

}  // namespace fulcrum::sim::testing
