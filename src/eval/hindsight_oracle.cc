#include "corun/eval/hindsight_oracle.h"

#include <algorithm>
#include <limits>
#include <optional>

#include "corun/runtime/controller.h"
#include "corun/runtime/transition_ledger.h"

namespace corun {

namespace {

// `c` with the models that do not run in `w` absent; nullopt when a model that runs has none.
std::optional<JointConfig> fitted(const JointConfig& c, const Workload& w) {
  JointConfig out(w.models.size(), kAbsent);
  for (std::size_t m = 0; m < w.models.size(); ++m) {
    if (!w.models[m].active) continue;
    if (m >= c.size() || c[m] == kAbsent) return std::nullopt;
    out[m] = c[m];
  }
  return out;
}

}  // namespace

HindsightOracle::HindsightOracle(RobustOracle& robust, const ActuationTable& table,
                                 double window_s, std::size_t keep)
    : robust_(robust), table_(table), window_s_(window_s), keep_(keep) {}

double HindsightOracle::step_value(const std::vector<HindsightInterval>& intervals,
                                   std::size_t k, const JointConfig& from, const JointConfig& to,
                                   const std::vector<double>* admitted) {
  const HindsightInterval& iv = intervals[k];
  std::optional<Workload> runs;
  if (admitted != nullptr && !admitted->empty()) runs = admitted_workload(iv.now, *admitted);
  double v = robust_.score(iv.now, iv.conditions, to, runs ? &*runs : nullptr).earned;
  if (from.empty() || from == to) return v;
  TransitionLedger ledger(iv.now.models.size());
  ledger.begin(joint_transition(table_, iv.now, from, to));
  // The windows the transition charges, the plan kept until it is paid (or the model set
  // changes).
  for (std::size_t j = k; j < intervals.size() && !ledger.idle(); ++j) {
    const auto kept = fitted(to, intervals[j].now);
    if (!kept || *kept != to) break;
    const auto charges = ledger.next_window(to, window_s_);
    std::optional<Workload> runs_j;
    if (admitted != nullptr && !admitted->empty()) {
      runs_j = admitted_workload(intervals[j].now, *admitted);
    }
    v += robust_.transition_penalty(intervals[j].now, intervals[j].conditions, to, charges,
                                    runs_j ? &*runs_j : nullptr);
  }
  return v;
}

HindsightSchedule HindsightOracle::best(const std::vector<HindsightInterval>& intervals) {
  struct Node {
    JointConfig config;
    double value = 0;  // best value of a schedule of the segment ending here
    int parent = -1;   // index in the previous layer
  };
  const std::size_t t = intervals.size();
  HindsightSchedule out;
  out.plans.assign(t, {});
  out.planned.assign(t, false);
  std::vector<std::vector<Node>> layers(t);

  // A segment is a run of intervals where some plan holds: it ends where none does, and its
  // best schedule is traced back from its best last node.
  auto close_segment = [&](std::size_t end) {  // `end` = the segment's last interval
    const auto& last = layers[end];
    if (last.empty()) return;
    std::size_t best = 0;
    for (std::size_t i = 1; i < last.size(); ++i) {
      if (last[i].value > last[best].value) best = i;
    }
    out.value += last[best].value;
    int at = static_cast<int>(best);
    for (std::size_t k = end + 1; k-- > 0 && at >= 0;) {
      out.plans[k] = layers[k][static_cast<std::size_t>(at)].config;
      at = layers[k][static_cast<std::size_t>(at)].parent;
    }
  };

  for (std::size_t k = 0; k < t; ++k) {
    const HindsightInterval& iv = intervals[k];
    const RobustOracle::Answer answer = robust_.best(iv.now, iv.conditions);
    if (!answer.feasible) {
      if (k > 0) close_segment(k - 1);
      continue;
    }
    out.planned[k] = true;
    std::vector<JointConfig> candidates;
    for (const auto& [c, u] : answer.candidates) candidates.push_back(c);
    const std::vector<Node>* prev = k > 0 && !layers[k - 1].empty() ? &layers[k - 1] : nullptr;
    if (prev != nullptr) {
      // The previous interval's best nodes, where they still fit the workload.
      std::vector<std::size_t> order(prev->size());
      for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
      std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
        return (*prev)[x].value > (*prev)[y].value;
      });
      std::size_t carried = 0;
      for (std::size_t i : order) {
        if (carried >= keep_) break;
        const auto c = fitted((*prev)[i].config, iv.now);
        if (!c || std::find(candidates.begin(), candidates.end(), *c) != candidates.end()) continue;
        candidates.push_back(*c);
        ++carried;
      }
    }
    for (const JointConfig& c : candidates) {
      Node node;
      node.config = c;
      if (prev == nullptr) {
        node.value = step_value(intervals, k, {}, c, nullptr);
      } else {
        node.value = -std::numeric_limits<double>::infinity();
        for (std::size_t p = 0; p < prev->size(); ++p) {
          const double v = (*prev)[p].value + step_value(intervals, k, (*prev)[p].config, c, nullptr);
          if (v > node.value) {
            node.value = v;
            node.parent = static_cast<int>(p);
          }
        }
      }
      layers[k].push_back(std::move(node));
    }
  }
  if (t > 0) close_segment(t - 1);
  for (std::size_t k = 1; k < t; ++k) {
    if (out.plans[k - 1].empty() || out.plans[k].empty()) continue;
    const JointTransition jt = joint_transition(table_, intervals[k].now, out.plans[k - 1],
                                                out.plans[k]);
    for (const auto& s : jt.steps) {
      if (s.from == kAbsent || s.to == kAbsent) continue;
      if (s.change.action == Actuation::kRestart) ++out.restarts;
      if (s.change.action == Actuation::kReload) ++out.reloads;
    }
  }
  return out;
}

double HindsightOracle::value(const std::vector<HindsightInterval>& intervals,
                              const std::vector<JointConfig>& plans,
                              const std::vector<std::vector<double>>& admitted,
                              const std::vector<bool>& counted) {
  double v = 0;
  for (std::size_t k = 0; k < intervals.size() && k < plans.size(); ++k) {
    if (k >= counted.size() || !counted[k]) continue;
    const bool any = std::any_of(plans[k].begin(), plans[k].end(),
                                 [](std::int32_t l) { return l != kAbsent; });
    if (!any) continue;
    const JointConfig none;
    v += step_value(intervals, k, k > 0 ? plans[k - 1] : none, plans[k],
                    k < admitted.size() ? &admitted[k] : nullptr);
  }
  return v;
}

}  // namespace corun
