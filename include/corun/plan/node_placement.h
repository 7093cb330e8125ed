#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace corun {

/// @brief What a placement rule sees of a node: each model's memory request and each unit's
/// capacity, which units each model may use (its pin), and how much each model demands.
struct PlacementInput {
  std::vector<double> vram_request_bytes;  ///< per model
  std::vector<double> unit_vram_bytes;     ///< per unit
  std::vector<std::vector<bool>> allowed;  ///< [model][unit]: the pin lets it run there
  std::vector<double> demand;              ///< per model, for demand-ordered rules (iGniter)
  /// Only for iGniter: the interference placing `model` on `unit` adds, given the models
  /// already there (`residents`), as the planner's predictor sees it.
  std::function<double(std::size_t unit, std::span<const std::size_t> residents, std::size_t model)>
      interference;
};

/// @brief A model's unit in a placement that could not place it.
inline constexpr std::int32_t kNotPlaced = -1;

/// @brief Memory bin-packing as HAMi's `binpack` policy does it: models in workload order,
/// each on the allowed unit with the most memory already requested among those where its
/// request still fits (fill the fullest GPU first); ties go to the lower unit.
/// @return per model: its unit, or kNotPlaced when no allowed unit has room
std::vector<std::int32_t> place_binpack(const PlacementInput& in);

/// @brief Spread (HAMi's `spread`, least loaded): models in workload order, each on the
/// allowed unit with the smallest fraction of memory requested where its request fits.
std::vector<std::int32_t> place_spread(const PlacementInput& in);

/// @brief Round-robin: models in workload order, each on the next allowed unit (cyclically,
/// from the one after the previous model's) where its request fits.
std::vector<std::int32_t> place_round_robin(const PlacementInput& in);

/// @brief iGniter's greedy placement (Xu et al., "iGniter: Interference-Aware GPU Resource
/// Provisioning for Predictable DNN Inference in the Cloud", IEEE TPDS 2023): models in
/// decreasing order of demand, each on the allowed unit where its request fits and the
/// predicted interference it adds (PlacementInput::interference) is smallest; ties go to the
/// lower unit. iGniter also sizes each model's GPU share; here corun's per-unit plan does that.
std::vector<std::int32_t> place_igniter(const PlacementInput& in);

/// @brief The baseline rules by name: "binpack", "spread", "round-robin", "igniter".
std::vector<std::string> placement_rule_names();
/// @brief Runs the rule called `name` (one of placement_rule_names()).
std::vector<std::int32_t> place_by_rule(std::string_view name, const PlacementInput& in);

}  // namespace corun
