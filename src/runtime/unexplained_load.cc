#include "corun/runtime/unexplained_load.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace corun {

Status check(const UnexplainedLoadOptions& o) {
  auto bad = [](const char* f, const char* why) {
    return Error(std::string("unexplained_load.") + f + ": " + why, Error::Kind::kInvalidInput);
  };
  if (!(o.min_share > 0 && o.min_share <= 1)) return bad("min_share", "must be in (0, 1]");
  if (o.windows < 1 || o.windows > 100) return bad("windows", "must be in [1, 100]");
  return Status();
}

namespace {

Interference mean_load(const std::vector<Interference>& windows) {
  Interference m;
  for (const Interference& w : windows) {
    m.sm_util += w.sm_util / static_cast<double>(windows.size());
    m.bandwidth_util += w.bandwidth_util / static_cast<double>(windows.size());
  }
  return m;
}

}  // namespace

bool UnexplainedLoad::observe(double sm_measured, double sm_predicted,
                              std::optional<double> dram_measured,
                              std::optional<double> dram_predicted) {
  sm_excess_ = sm_measured - sm_predicted;
  dram_excess_.reset();
  if (dram_measured && dram_predicted) dram_excess_ = *dram_measured - *dram_predicted;
  const bool over = sm_excess_ >= options_.min_share ||
                    (dram_excess_ && *dram_excess_ >= options_.min_share);
  const Interference here{std::clamp(sm_excess_, 0.0, 1.0),
                          std::clamp(dram_excess_.value_or(sm_excess_), 0.0, 1.0)};
  if (over != present_) {
    streak_.push_back(here);
  } else {
    streak_.clear();
  }
  if (streak_.size() >= static_cast<std::size_t>(options_.windows)) {
    present_ = over;
    planned_ = present_ ? mean_load(streak_) : Interference{};
    streak_.clear();
    moved_.clear();
    return true;
  }
  if (present_ && over) {
    const bool off = std::abs(here.sm_util - planned_.sm_util) >= options_.min_share ||
                     std::abs(here.bandwidth_util - planned_.bandwidth_util) >= options_.min_share;
    if (off) {
      moved_.push_back(here);
    } else {
      moved_.clear();
    }
    if (moved_.size() >= static_cast<std::size_t>(options_.windows)) {
      planned_ = mean_load(moved_);
      moved_.clear();
    }
  }
  return false;
}

}  // namespace corun
