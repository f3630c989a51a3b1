#include "fulcrum/prefill/head_plan.hpp"

#include <utility>

namespace fulcrum::prefill {

heads::HeadCostModel head_cost_model(const ModelShape& shape, std::optional<heads::RuntimeProfile> profile) {
  heads::HeadCostModel model;
  model.profile = std::move(profile);
  model.analytic.head_dim = shape.head_dim;
  model.analytic.hidden = shape.hidden;
  return model;
}

}  // namespace fulcrum::prefill
