// The small Llama shape the prefill tests run (8 q heads in 2 GQA groups, so assignments can split groups
// and give ranks uneven head counts), and a temporary weights file that removes itself.
#pragma once

#include "fulcrum/prefill/weights_file.hpp"
#include "fulcrum/workload/model_shape.hpp"

#include <filesystem>
#include <string>

namespace fulcrum::prefill::testing {

inline ModelShape test_model() {
  ModelShape s;
  s.name = "prefill-test";
  s.layers = 2;
  s.hidden = 64;
  s.q_heads = 8;
  s.kv_heads = 2;
  s.head_dim = 16;
  s.ffn_hidden = 96;
  s.rms_norm_eps = 1e-5;
  s.rope_theta = 10000;
  return s;
}

class TempWeights {
 public:
  TempWeights(const ModelShape& shape, std::uint64_t seed, const std::string& name)
      : path_((std::filesystem::temp_directory_path() /
               (name + "." + std::to_string(std::hash<std::string>{}(name + std::to_string(seed))) + ".fw"))
                  .string()) {
    write_random_weights(path_, shape, seed);
  }
  ~TempWeights() { std::filesystem::remove(path_); }
  TempWeights(const TempWeights&) = delete;
  TempWeights& operator=(const TempWeights&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace fulcrum::prefill::testing
