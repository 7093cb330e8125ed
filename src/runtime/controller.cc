// The online controller's facade: the workload as the planner knows it, the plan in force, ids.

#include "corun/runtime/controller.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "controller_state.h"
#include "corun/core/check.h"
#include "corun/plan/objective.h"
#include "corun/runtime/corrected_predictor.h"

namespace corun {

using detail::names_of;

std::string Controller::model_key(const ModelSpec& m) {
  std::string k = m.arch.name;
  for (const auto& knob : m.knobs) {
    k += "|" + std::string(knob_decl(knob.id).name) + "=";
    for (double v : knob.values) k += format_knob_value(knob.id, v) + ",";
  }
  return k;
}

Controller::Controller(const Context& ctx, Workload w, std::unique_ptr<PredictorSource> source,
                       ControllerOptions options)
    : ctx_(ctx),
      options_(std::move(options)),
      source_(std::move(source)),
      workload_(std::move(w)),
      recent_(std::make_unique<Recent>()) {
  CORUN_CHECK(source_ != nullptr);
  const Status admission = check(options_.admission);
  CORUN_CHECK_MSG(admission.ok(), admission.ok() ? "" : admission.error().message().c_str());
  const Status transitions = check(options_.transitions);
  CORUN_CHECK_MSG(transitions.ok(),
                  transitions.ok() ? "" : transitions.error().message().c_str());
  auto solver = make_solver(options_.solver);
  CORUN_CHECK_MSG(solver.ok(), "the controller's solver name is checked by its callers");
  solver_ = std::move(*solver);
  for (const auto& m : workload_.models) {
    model_state_.push_back(std::make_unique<ModelState>());
    model_state_.back()->key = model_key(m);
  }
  plan_names_ = names_of(workload_);
}

Controller::~Controller() = default;

std::string Controller::apply(const TimelineEvent& e) {
  CORUN_CHECK_MSG(e.planner_visible(), "drift events act on the testbed, not on the planner");
  MutexLock lock(mutex_);
  ModelSpec& m = workload_.models[e.model];
  switch (e.kind) {
    case TimelineEvent::Kind::kArrive:
      m.active = true;
      break;
    case TimelineEvent::Kind::kDepart:
      m.active = false;
      break;
    case TimelineEvent::Kind::kDemand:
    case TimelineEvent::Kind::kContext:
      if (!(m.demand == e.demand) && options_.learning.enabled) model_state_[e.model]->reopen();
      m.demand = e.demand;
      model_state_[e.model]->admission.demand_changed();
      break;
    case TimelineEvent::Kind::kSla:
      m.sla = e.sla;
      model_state_[e.model]->admission.demand_changed();
      break;
    default:
      break;
  }
  ++generation_;
  event_times_s_.push_back(now_s_);
  due_ = true;
  due_reason_ = "event";
  recent_->windows.clear();
  return std::string(to_string(e.kind)) + " " + m.name;
}

void Controller::set_gpu_load(const Interference& load) {
  MutexLock lock(mutex_);
  if (load == gpu_load_) return;
  gpu_load_ = load;
  if (options_.learning.enabled) {
    for (auto& l : model_state_) l->reopen();
  }
  ++generation_;
  event_times_s_.push_back(now_s_);
  due_ = true;
  due_reason_ = "gpu load";
  recent_->windows.clear();  // measured under the other load: no refit replays them
}

Interference Controller::gpu_load() const {
  MutexLock lock(mutex_);
  return gpu_load_;
}

void Controller::set_workload(Workload w) {
  MutexLock lock(mutex_);
  std::vector<std::unique_ptr<ModelState>> next;
  for (const auto& m : w.models) {
    std::unique_ptr<ModelState> l;
    const std::string key = model_key(m);
    for (std::size_t i = 0; i < workload_.models.size(); ++i) {
      if (workload_.models[i].name == m.name && model_state_[i] && model_state_[i]->key == key) {
        l = std::move(model_state_[i]);
        if (!(workload_.models[i].demand == m.demand)) {
          if (options_.learning.enabled) l->reopen();
          l->admission.demand_changed();
        }
        break;
      }
    }
    if (!l) {
      l = std::make_unique<ModelState>();
      l->key = key;
    }
    next.push_back(std::move(l));
  }
  model_state_ = std::move(next);
  workload_ = std::move(w);
  ++generation_;
  event_times_s_.push_back(now_s_);
  due_ = true;
  due_reason_ = "models";
  recent_->windows.clear();
}

void Controller::advance_to(double now_s) {
  MutexLock lock(mutex_);
  now_s_ = std::max(now_s_, now_s);
}

Workload Controller::workload() const {
  MutexLock lock(mutex_);
  return workload_;
}

bool Controller::replan_due() const {
  MutexLock lock(mutex_);
  return due_;
}

std::string Controller::due_reason() const {
  MutexLock lock(mutex_);
  return due_reason_;
}

std::shared_ptr<const Decision> Controller::plan() const {
  MutexLock lock(mutex_);
  return plan_;
}

const surrogate::Surrogate* Controller::fitted() const {
  MutexLock planning(planner_mutex_);
  return source_->fitted();
}

std::size_t Controller::source_measurements() const {
  MutexLock planning(planner_mutex_);
  return source_->measurements_taken();
}

void Controller::restore(Decision d) {
  MutexLock lock(mutex_);
  const std::size_t n = workload_.models.size();
  d.config.resize(n, kAbsent);
  d.predicted.resize(n);
  d.base.resize(n);
  d.margins.resize(n);
  d.best_effort.resize(n, false);
  last_id_ = std::max(last_id_, d.id);
  decisions_ = std::max({decisions_, d.id, d.decision});
  for (std::size_t m = 0; m < n && m < model_state_.size(); ++m) {
    model_state_[m]->admission.decided(m < d.admitted.size() ? d.admitted[m] : 1.0, false);
  }
  plan_ = std::make_shared<const Decision>(std::move(d));
  plan_names_ = names_of(workload_);
  planned_log_bound_.assign(n * kTargetCount, NAN);
  due_ = false;
  due_reason_.clear();
}

void Controller::continue_after(std::int64_t last, std::int64_t last_decision) {
  MutexLock lock(mutex_);
  last_id_ = std::max(last_id_, last);
  decisions_ = std::max({decisions_, last, last_decision});
}

bool measured_breach(const ModelSpec& m, const ModelObservation& o) {
  if (o.failed) return true;
  for (const SlaKey& k : sla_keys(m)) {
    if (breaks(k, *(m.sla.*k.limit), o.measured[k.index])) return true;
  }
  return false;
}

}  // namespace corun
