#include "corun/serve/service.h"

// corun serve's telemetry routes: POSTed samples, what they taught, and the flusher that stores
// them.

#include <cstdio>
#include <chrono>

#include "corun/serve/plan_record.h"

namespace corun::serve {

using nlohmann::json;


HttpResponse Service::post_telemetry(const RouteCall& call) {
  // Validate everything before touching state, so that a bad sample changes nothing.
  auto parsed = parse_telemetry(call.body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return error(*e);
  const auto& samples = std::get<std::vector<TelemetrySample>>(parsed);
  const bool batch = call.body.is_array();

  std::int64_t current = 0;
  Ingested in;
  {
    MutexLock lock(state_mutex_);
    for (std::size_t i = 0; i < samples.size(); ++i) {
      if (registry_.find(samples[i].model) == nullptr) {
        return error({404, "unknown_model", "no model '" + samples[i].model.substr(0, 64) + "'",
                      batch ? "[" + std::to_string(i) + "].model" : "model"});
      }
    }
    const auto plan = controller_->plan();
    current = plan ? plan->id : 0;
    in = ingest_locked(samples, current);
  }
  // What the samples taught is durable before they are acknowledged.
  if (auto ok = store_->append_learning(in.learned); !ok) {
    return storage_failure(call, ok.error());
  }
  if (in.wants.replan) planner_.request(in.wants.reason);
  metrics_.count_samples(samples.size());
  json out = {{"accepted", samples.size()}, {"breaches", in.breaches}, {"plan_id", current}};
  if (!in.held.empty()) {
    json held = json::array();
    for (const auto& i : in.held) held.push_back({{"metric", i.metric}, {"reason", i.detail}});
    out["held"] = std::move(held);
  }
  return json_response(202, out);
}

Service::Ingested Service::ingest_locked(const std::vector<TelemetrySample>& samples,
                                         std::int64_t current) {
  Ingested in;
  // The controller's clock (a minimum dwell, a paused model's probe wait) runs with the windows,
  // not only with the decisions.
  controller_->advance_to(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count());
  const auto plan = controller_->plan();
  for (const auto& given : samples) {
    const auto index = registry_.index_of(given.model);
    if (!index) continue;
    const std::size_t m = *index;
    // A sample without a plan id is taken to be of the plan in force.
    const std::int64_t of = given.plan_id.value_or(current);
    if (!plan || of != current || m >= plan->config.size() || plan->config[m] == kAbsent) {
      // Observed under another plan: it teaches nothing about this one, but an SLA it broke
      // was broken (the ledger counts what was measured).
      const bool breach =
          measured_breach(registry_.entries()[m].model, given.observation(m, kAbsent));
      telemetry_.record(given, true, breach);
      in.breaches += breach ? 1 : 0;
      continue;
    }
    // A lone window far outside the model's noise neither teaches nor breaches until the next
    // window confirms it (StackTelemetryOptions::outliers).
    TelemetrySample s = given;
    auto& [judged, gate] = outliers_[s.model];
    if (judged != of) gate = OutlierGate();  // a new plan: its own noise
    judged = of;
    const auto held = hold_outliers(s, gate, options_.stack.outliers);
    in.held.insert(in.held.end(), held.begin(), held.end());
    const ModelObservation o = s.observation(m, plan->config[m]);
    std::vector<LearningSample> taught;
    const ObservationResult r = controller_->observe(std::span(&o, 1), of, &taught);
    for (const auto& x : taught) in.learned.push_back(to_json(x).dump());
    const bool breach = m < r.breach.size() && r.breach[m];
    telemetry_.record(s, false, breach);
    in.breaches += breach ? 1 : 0;
    if (r.replan && !in.wants.replan) in.wants = r;
  }
  return in;
}

json Service::learning_json() const {
  const auto state = controller_->learning_state();
  const Workload w = controller_->workload();
  json out = json::object();
  for (std::size_t m = 0; m < state.size() && m < w.models.size(); ++m) {
    out[w.models[m].name] = learning_state_json(state[m]);
  }
  return out;
}

HttpResponse Service::get_telemetry(const RouteCall&) {
  json out = json::object();
  const json learning = learning_json();
  {
    MutexLock lock(state_mutex_);
    for (const auto& m : registry_.entries()) {
      json t = telemetry_.to_json(m.name);
      if (learning.contains(m.name)) t["learning"] = learning[m.name];
      out[m.name] = std::move(t);
    }
    if (prometheus_) {
      return json_response(200, {{"models", out},
                                 {"flush_interval_ms", options_.telemetry_flush_ms},
                                 {"stack", stack_json_locked()}});
    }
  }
  return json_response(200, {{"models", out}, {"flush_interval_ms", options_.telemetry_flush_ms}});
}

void Service::flush_telemetry() {
  std::vector<std::pair<std::string, std::string>> rows;
  {
    MutexLock lock(state_mutex_);
    rows = telemetry_.take_dirty();
  }
  if (rows.empty()) return;
  auto ok = store_->save_telemetry(rows);
  if (!ok) {
    std::fprintf(stderr, "corun serve: telemetry flush failed: %s\n", ok.error().what().c_str());
    MutexLock lock(state_mutex_);
    telemetry_.mark_dirty();
  }
}

void Service::flusher_loop() {
  MutexLock lock(state_mutex_);
  while (!stopping_) {
    const auto due =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.telemetry_flush_ms);
    while (!stopping_ && flusher_cv_.wait_until(lock, due)) {
    }
    if (stopping_) break;
    lock.unlock();
    flush_telemetry();
    lock.lock();
  }
}

}  // namespace corun::serve
