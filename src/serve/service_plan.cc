#include "corun/serve/service.h"

// corun serve's planning: a plan made and put in force (plan_once), the waits on it, and the
// routes that report it (plan, history, health, metrics).

#include <chrono>
#include <cstdio>

#include "corun/core/clock.h"
#include "corun/core/json_number.h"
#include "corun/serve/plan_record.h"
#include "corun/serve/prometheus.h"

namespace corun::serve {

using nlohmann::json;


HttpResponse Service::post_replan(const RouteCall& call) {
  if (!call.request.body.empty() && (!call.body.is_object() || !call.body.empty())) {
    return error({400, "unexpected_body", "replan takes no parameters (send {} or nothing)", ""});
  }
  planner_.request("requested");
  return json_response(
      202, {{"requested", true}, {"plan_id", plan_id_.load()}, {"decision", decision_.load()}});
}

/// One decision's plan record and what publishing it needs.
struct Service::PlanDraft {
  json rec;
  json models = json::object();
  std::int64_t id = 0;
  std::int64_t decision = 0;
  double decision_ms = 0;
  std::shared_ptr<const Decision> before;  // the plan in force when the decision started
  std::shared_ptr<const InForce> decided;  // what this plan puts in force (null: no models)
  bool changed = true;                     // the decision changed what runs
};

Status Service::plan_once(const std::string& reason) {
  std::uint64_t generation = 0;
  bool empty = false;
  {
    MutexLock lock(state_mutex_);
    generation = registry_.generation();
    empty = registry_.empty();
  }
  PlanDraft p;
  p.rec = {{"created_at", utc_now_rfc3339_ms()},
           {"reason", reason},
           {"solver", options_.solver},
           {"device", device_.name}};
  if (empty) {
    record_empty_plan(p);
  } else {
    auto decided = record_decision(reason, p);
    if (!decided) return decided.error();
    if (!*decided) return {};
  }
  p.rec["id"] = p.id;
  p.rec["decision"] = p.decision;
  p.rec["decision_ms"] = p.decision_ms;
  p.rec["models"] = p.models;

  // The user's deployer applies a plan that changes what runs before it counts as in force; a
  // failure keeps the previous plan in force (in the controller too) and says so.
  if (p.changed && p.before && !options_.on_plan.command.empty()) {
    if (!run_on_plan_hook(p)) return {};
  }
  return publish_plan(generation, p);
}

void Service::record_empty_plan(PlanDraft& p) {
  // Nothing to plan: an empty plan says so (its id continues the sequence).
  p.id = plan_id_.load() + 1;
  p.decision = decision_.load() + 1;
  controller_->continue_after(p.id, p.decision);
  p.rec["feasible"] = true;
  p.rec["predicted_utility"] = 0.0;
  p.rec["evaluated"] = 0;
  p.rec["infeasible"] = json::array();
}

Result<bool> Service::record_decision(const std::string& reason, PlanDraft& p) {
  controller_->advance_to(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count());
  p.before = controller_->plan();
  auto decided = controller_->replan(reason);
  if (!decided) return decided.error();
  if (!*decided) {
    // The model set changed during the search: the controller wants another decision.
    planner_.request(reason);
    return false;
  }
  const Decision& d = **decided;
  const Workload w = controller_->workload();
  InForce in_force{{}, std::make_shared<const Decision>(d)};
  for (const auto& m : w.models) in_force.names.push_back(m.name);
  p.decided = std::make_shared<const InForce>(std::move(in_force));
  p.id = d.id;
  p.decision = d.decision;
  p.decision_ms = d.decision_ms;
  p.rec["source"] = d.source;
  p.rec["feasible"] = d.feasible;
  p.rec["predicted_utility"] = d.predicted_utility;
  p.rec["evaluated"] = d.stats.evaluated;
  json why = json::array();
  for (const auto& i : d.infeasible) why.push_back(i.message());
  p.rec["infeasible"] = why;
  p.models = decision_models_json(d, w);
  // The changes from the plan in force, and what applying them costs (space/transition.h).
  p.rec["transition"] = to_json(d.transition);
  p.changed = !p.before || p.before->config != d.config || p.before->admitted != d.admitted;
  return true;
}

bool Service::run_on_plan_hook(PlanDraft& p) {
  const HookOutcome hook = run_plan_hook(options_.on_plan, p.rec.dump() + "\n");
  metrics_.count_hook(hook.applied);
  const json outcome = {{"plan_id", p.id},
                        {"applied", hook.applied},
                        {"reason", hook.reason},
                        {"elapsed_ms", hook.elapsed_ms},
                        {"output", hook.output}};
  if (!hook.applied) {
    std::fprintf(stderr,
                 "corun serve: --on-plan did not apply plan %lld (%s): %s; plan %lld "
                 "stays in force\n",
                 static_cast<long long>(p.id), hook.reason.c_str(), hook.output.c_str(),
                 static_cast<long long>(p.before->id));
    keep_plan_in_force(p, outcome);
    return false;
  }
  p.rec["on_plan"] = outcome;
  return true;
}

void Service::keep_plan_in_force(const PlanDraft& p, const json& outcome) {
  controller_->restore(*p.before);
  std::shared_ptr<const std::string> body;
  {
    MutexLock lock(state_mutex_);
    plan_["on_plan"] = outcome;
    body = std::make_shared<const std::string>(plan_body(plan_));
  }
  {
    MutexLock body_lock(plan_body_mutex_);
    plan_body_.swap(body);
  }
  decision_ = p.decision;  // decided, and reported as not applied
  plan_cv_.notify_all();
}

Status Service::publish_plan(std::uint64_t generation, PlanDraft& p) {
  // Publish: durable first, then visible. The mutation lock makes "the models this plan was
  // made for" and "the models registered" the same set at the moment of the write.
  MutexLock mutate(mutate_mutex_);
  {
    MutexLock lock(state_mutex_);
    // The model set changed: a re-plan is pending.
    if (generation != registry_.generation()) return {};
  }
  // Keyed by decision: the history keeps every decision, those that kept the plan's id too.
  auto ok = store_->append_plan(p.decision, p.rec.dump());
  if (!ok) return ok;
  metrics_.observe_decision(p.decision_ms / 1e3);
  metrics_.count_replan();
  // Everything is built outside the lock; the critical section only moves and swaps, so a
  // planner descheduled there (it runs at low priority) holds request handlers up the least.
  auto body = std::make_shared<const std::string>(plan_body(p.rec));
  json copy = p.rec;
  {
    MutexLock lock(state_mutex_);
    plan_.swap(p.rec);
    in_force_ = p.decided;
    history_.push_back(std::move(copy));
    if (history_.size() > options_.history_in_memory) history_.pop_front();
    plan_id_ = p.id;
    decision_ = p.decision;
  }
  {
    MutexLock lock(plan_body_mutex_);
    plan_body_.swap(body);
  }
  plan_cv_.notify_all();
  return {};
}

bool Service::wait_for_plan(std::int64_t after, int timeout_ms) {
  return wait_for(plan_id_, after, timeout_ms);
}

bool Service::wait_for_decision(std::int64_t after, int timeout_ms) {
  return wait_for(decision_, after, timeout_ms);
}

bool Service::wait_for(const std::atomic<std::int64_t>& counter, std::int64_t after,
                       int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  MutexLock lock(state_mutex_);
  while (counter.load() <= after && !stopping_) {
    if (!plan_cv_.wait_until(lock, deadline)) break;
  }
  return counter.load() > after;
}

HttpResponse Service::get_plan(const RouteCall&) {
  // The hottest read: the serialised plan is shared, so no JSON work and no state lock here.
  std::shared_ptr<const std::string> body;
  {
    MutexLock lock(plan_body_mutex_);
    body = plan_body_;
  }
  if (!body) {
    MutexLock lock(state_mutex_);
    return error(
        {404, "no_plan",
         registry_.empty() ? "no models are registered" : "the first plan is being computed", ""});
  }
  // The stored plan plus what was learned since it was made: each model's prediction error and
  // the margin it is planned with now.
  HttpResponse r;
  r.body = body->substr(0, body->rfind('}'));
  r.body += ",\"learning\":" + learning_json().dump(-1, ' ', true, json::error_handler_t::replace);
  r.body += ",\"catalog\":" + catalog_record_;
  if (prometheus_) {
    MutexLock lock(state_mutex_);
    r.body +=
        ",\"telemetry\":" + stack_json_locked().dump(-1, ' ', true, json::error_handler_t::replace);
  }
  r.body += "}\n";
  return r;
}

HttpResponse Service::get_history(const RouteCall& call) {
  const HttpRequest& req = call.request;
  std::size_t limit = 50;
  const auto it = req.query.find("limit");
  if (it != req.query.end()) {
    const std::string& v = it->second;
    char* end = nullptr;
    const long long n = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || v.size() > 6 || *end != '\0' || n < 1 || n > 1000) {
      return error({400, "bad_parameter", "limit must be an integer in [1, 1000]", "limit"});
    }
    limit = static_cast<std::size_t>(n);
  }
  for (const auto& [k, v] : req.query) {
    (void)v;
    if (k != "limit") {
      return error({400, "unknown_parameter", "unknown query parameter '" + k.substr(0, 64) + "'",
                    k.substr(0, 64)});
    }
  }
  json plans = json::array();
  {
    MutexLock lock(state_mutex_);
    const std::size_t from = history_.size() > limit ? history_.size() - limit : 0;
    for (std::size_t i = from; i < history_.size(); ++i) plans.push_back(history_[i]);
  }
  return json_response(200, {{"plans", plans}});
}

HttpResponse Service::get_health(const RouteCall&) {
  const PlannerStatus planner = planner_.status();
  MutexLock lock(state_mutex_);
  json out = {{"status", "ok"},
              {"models", registry_.size()},
              {"plan_id", plan_id_.load()},
              {"decision", decision_.load()},
              {"replanning", planner.replanning},
              {"replan_pending", planner.pending},
              {"device", device_.name}};
  if (!planner.last_error.empty()) out["last_plan_error"] = planner.last_error;
  if (prometheus_ && !prometheus_up_) {
    // Still serving the plan in force, but learning nothing: degraded, not down.
    out["status"] = "degraded";
    out["telemetry_error"] = prometheus_error_;
  }
  return json_response(200, out);
}

HttpResponse Service::get_metrics(const RouteCall&) {
  ServeGauges g;
  {
    MutexLock lock(state_mutex_);
    g.models = registry_.size();
    g.plan_id = plan_id_.load();
    for (const auto& m : registry_.entries()) {
      g.breaches.emplace_back(m.name, telemetry_.at(m.name).breaches);
    }
    if (prometheus_) {
      g.prometheus_up = prometheus_up_;
      for (const auto& [name, st] : stack_status_) {
        ServeGauges::StackModel sm{name, st.learned, {}};
        for (const auto& i : st.issues) sm.issues.push_back(i.quality);
        g.stack.push_back(std::move(sm));
      }
      if (gpu_reading_ && gpu_reading_->sm_active) g.gpu_sm_active = *gpu_reading_->sm_active;
      if (gpu_predicted_) {
        g.gpu_sm_active_predicted = gpu_predicted_->sm_util;
        g.gpu_unexplained_load = unexplained_.present();
        g.gpu_planned_load_sm = controller_->gpu_load().sm_util;
      }
    }
  }
  {
    // From the plan record in force, by model name.
    MutexLock lock(state_mutex_);
    const json* ms = plan_.is_object() && plan_.contains("models") ? &plan_["models"] : nullptr;
    if (ms != nullptr && ms->is_object()) {
      for (const auto& [name, m] : ms->items()) {
        ServeGauges::PlanModel pm;
        pm.model = name;
        pm.best_effort = m.value("best_effort", false);
        pm.admitted = json_number_or(m, "admitted", 1.0);
        if (json_number_or(m, "index", std::int32_t{0}) == kAbsent) pm.admitted = 0;
        pm.feasible = !pm.best_effort && pm.admitted >= 1;
        g.plan_models.push_back(std::move(pm));
      }
    }
  }
  const auto state = controller_->learning_state();
  const Workload w = controller_->workload();
  for (std::size_t m = 0; m < state.size() && m < w.models.size(); ++m) {
    g.learning.emplace_back(w.models[m].name, state[m]);
  }
  HttpResponse r;
  r.status = 200;
  r.content_type = "text/plain; version=0.0.4";
  r.body = render_prometheus(metrics_.snapshot(), g);
  return r;
}

}  // namespace corun::serve
