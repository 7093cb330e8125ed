// corun serve's stack telemetry: each window, every model with a `telemetry` source is read from
// Prometheus and learned from as POSTed telemetry is (docs/stack.md).

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "corun/core/clock.h"
#include "corun/core/strings.h"
#include "corun/runtime/loaded_predictor.h"
#include "corun/serve/service.h"

namespace corun::serve {

using nlohmann::json;

Status check(const StackTelemetryOptions& o) {
  if (auto ok = check(o.read); !ok) return ok;
  if (auto ok = check(o.outliers); !ok) return ok;
  if (auto ok = check(o.unexplained); !ok) return ok;
  auto bad = [](const char* f, const char* why) {
    return Error(std::string("telemetry.") + f + ": " + why, Error::Kind::kInvalidInput);
  };
  if (!(o.demand_band > 0 && o.demand_band <= 10)) return bad("demand_band", "must be in (0, 10]");
  if (o.demand_windows < 1 || o.demand_windows > 100) {
    return bad("demand_windows", "must be in [1, 100]");
  }
  if (o.timeout_ms < 100 || o.timeout_ms > 60000) {
    return bad("timeout_ms", "must be in [100, 60000]");
  }
  if (!(o.max_backoff_s >= 1 && o.max_backoff_s <= 3600)) {
    return bad("max_backoff_s", "must be in [1, 3600]");
  }
  return Status();
}

namespace {

json issues_json(const std::vector<WindowIssue>& issues) {
  json out = json::array();
  for (const auto& i : issues) {
    json e = {{"status", to_string(i.quality)}, {"detail", i.detail}};
    if (!i.metric.empty()) e["metric"] = i.metric;
    out.push_back(std::move(e));
  }
  return out;
}

// The registered demand's rate and the observed one, if the model has a rate demand and the
// window observed it.
std::optional<std::pair<double, double>> rates(const ModelSpec& m, const WindowReading& r) {
  if (m.demand.closed_loop()) return std::nullopt;
  if (m.demand.rps > 0 && r.rps > 0) return std::make_pair(m.demand.rps, r.rps);
  if (m.demand.fps > 0 && r.fps > 0) return std::make_pair(m.demand.fps, r.fps);
  return std::nullopt;
}

// The quality names of `issues`, in order (what a change of status is logged by).
std::vector<std::string> quality_names(const std::vector<WindowIssue>& issues) {
  std::vector<std::string> out;
  for (const auto& x : issues) out.emplace_back(to_string(x.quality));
  return out;
}

}  // namespace

/// What one stack window reads (under the lock, then without it), what it records under the
/// lock, and what it leaves to do once the lock is released.
struct Service::StackWindow {
  std::vector<ModelSpec> models;
  std::int64_t current = 0;
  bool same_plan = false;
  std::shared_ptr<const Decision> in_force;
  Workload workload;
  std::vector<WindowReading> readings;
  std::optional<GpuReading> gpu;
  std::optional<GpuState> predicted;
  Ingested in;
  std::vector<std::pair<std::string, json>> demand_changes;
  bool gpu_load_changed = false;  ///< the controller now plans with another unexplained load
  std::vector<std::string> log;
  bool up = true;    ///< Prometheus answered the window
  std::string down;  ///< why it did not
};

/// A model's observed demand against its registered one in one window.
struct Service::DemandBand {
  std::optional<std::pair<double, double>> rates;  ///< registered, observed (see rates())
  double ratio = 0;                                ///< observed / registered - 1
  bool out = false;                                ///< outside the band
};

void Service::read_stack_window(const PromQuery& query) {
  StackWindow w;
  begin_stack_window(w);
  if (!read_stack_models(w, query)) return;
  if (!options_.stack.dcgm_labels.empty()) read_stack_gpu(w, query);
  {
    MutexLock lock(state_mutex_);
    for (std::size_t i = 0; i < w.models.size(); ++i) observe_model_window_locked(w, i);
    if (w.gpu) observe_gpu_window_locked(w);
    if (w.up != prometheus_up_) {
      w.log.push_back(w.up ? "Prometheus answers again" : "Prometheus unreachable: " + w.down);
    }
    prometheus_up_ = w.up;
    prometheus_error_ = w.up ? "" : w.down;
  }
  apply_stack_window(w);
  metrics_.count_samples(w.readings.size());
}

void Service::begin_stack_window(StackWindow& w) {
  // What to read, under the lock; the queries run without it.
  MutexLock lock(state_mutex_);
  for (const auto& e : registry_.entries()) {
    if (e.model.telemetry.enabled()) w.models.push_back(e.model);
  }
  w.in_force = controller_->plan();
  w.current = w.in_force ? w.in_force->id : 0;
  w.same_plan = w.current > 0 && stack_plan_id_ == w.current;
  stack_plan_id_ = w.current;
  if (!options_.stack.dcgm_labels.empty()) w.workload = controller_->workload();
}

bool Service::read_stack_models(StackWindow& w, const PromQuery& query) {
  w.readings.reserve(w.models.size());
  for (const auto& m : w.models) {
    {
      MutexLock lock(state_mutex_);
      if (stopping_) return false;  // a server stopping does not wait for the rest of a window
    }
    w.readings.push_back(read_window(m, options_.stack.read, query));
  }
  return true;
}

void Service::read_stack_gpu(StackWindow& w, const PromQuery& query) const {
  w.gpu = read_gpu_window(options_.stack.dcgm_labels, options_.stack.read, query);
  // The GPU the plan in force should keep busy, by the catalog twin (noise-free), when the
  // window is clean, of that plan alone, and measures SM activity itself
  // (DCGM_FI_DEV_GPU_UTIL only says a kernel ran).
  if (w.gpu->issues.empty() && w.gpu->sm_active && w.gpu->sm_active_field == kDcgmSmActive &&
      w.same_plan && w.in_force && w.in_force->config.size() == w.workload.models.size()) {
    const Measurement m = twin_->measure(ctx_, w.workload, w.in_force->config,
                                         MeasureOptions(options_.stack.read.window_s, {}, false));
    if (m.ok()) w.predicted = m.gpu;
  }
}

Service::DemandBand Service::demand_band(const ModelSpec& m, const WindowReading& r) const {
  DemandBand b;
  b.rates = rates(m, r);
  if (r.learnable && b.rates) {
    const double expected = b.rates->first * options_.stack.read.window_s;
    const double band = std::max(options_.stack.demand_band, 3 / std::sqrt(expected));
    b.ratio = b.rates->second / b.rates->first - 1;
    b.out = std::abs(b.ratio) > band;
  }
  return b;
}

void Service::observe_model_window_locked(StackWindow& w, std::size_t i) {
  const ModelSpec& m = w.models[i];
  WindowReading& r = w.readings[i];
  if (registry_.find(m.name) == nullptr) return;  // removed meanwhile
  if (r.has(DataQuality::kUnreachable)) {
    w.up = false;
    w.down = r.issues.front().detail;
  }
  // The observed demand against the registered one: out of the band, the window measured
  // another workload than the plan was predicted for. The band is at least 3 Poisson sds of
  // the window's expected count.
  const DemandBand band = demand_band(m, r);
  // A window counts toward the plan in force only when that plan ran through all of it,
  // at the demand it was made for (as `corun run` learns no trace window out of its band).
  const bool learn = r.learnable && w.same_plan && !band.out;
  if (band.out) {
    char detail[160];
    std::snprintf(detail, sizeof detail,
                  "observed %.3g/s against %.3g/s registered: not learned (a plan for another "
                  "demand)",
                  band.rates->second, band.rates->first);
    r.issues.push_back({DataQuality::kDemandMoved, "", detail});
  }
  record_stack_status_locked(w, m, r, learn);
  follow_observed_demand_locked(w, m, r, band);
}

void Service::record_stack_status_locked(StackWindow& w, const ModelSpec& m, const WindowReading& r,
                                         bool learn) {
  StackStatus& st = stack_status_[m.name];
  const std::vector<std::string> before = quality_names(st.issues);
  st.at_unix_ms = unix_now_ms();
  st.plan_id = w.current;
  st.latency_ms_mean = r.latency_ms_mean;
  st.rps = r.rps;
  st.fps = r.fps;
  st.issues = r.issues;
  st.learned = false;
  if (learn) {
    TelemetrySample s = r.sample;
    s.plan_id = w.current;
    const Ingested one = ingest_locked({s}, w.current);
    w.in.breaches += one.breaches;
    w.in.learned.insert(w.in.learned.end(), one.learned.begin(), one.learned.end());
    st.issues.insert(st.issues.end(), one.held.begin(), one.held.end());
    if (one.wants.replan && !w.in.wants.replan) w.in.wants = one.wants;
    st.learned = true;
  }
  const std::vector<std::string> after = quality_names(st.issues);
  if (after != before) {
    w.log.push_back(m.name + ": " + (after.empty() ? "telemetry clean" : join(after, ", ")) +
                    (st.issues.empty() ? "" : " (" + st.issues.front().detail + ")"));
  }
}

void Service::follow_observed_demand_locked(StackWindow& w, const ModelSpec& m,
                                            const WindowReading& r, const DemandBand& band) {
  // The observed demand follows the registered one with hysteresis: out of the band, on
  // one side, in demand_windows clean windows in a row (whichever plan ran: demand is not
  // the plan's).
  const auto& rr = band.rates;
  std::vector<double>& streak = demand_streak_[m.name];
  if (!r.learnable || !rr) {
    streak.clear();
    return;
  }
  const bool same_side = streak.empty() || (streak.back() > rr->first) == (band.ratio > 0);
  if (!band.out || !same_side) streak.clear();
  if (!band.out) return;
  streak.push_back(rr->second);
  if (static_cast<int>(streak.size()) < options_.stack.demand_windows) return;
  std::vector<double> seen = streak;
  streak.clear();
  std::nth_element(seen.begin(), seen.begin() + static_cast<std::ptrdiff_t>(seen.size() / 2),
                   seen.end());
  json demand = registry_.find(m.name)->spec.value("demand", json::object());
  const double observed = std::round(seen[seen.size() / 2] * 1000) / 1000;
  demand[m.demand.rps > 0 ? "rps" : "fps"] = observed;
  if (m.arch.family == ModelFamily::kLlm) {
    if (r.prompt_tokens >= 1) demand["prompt_tokens"] = std::lround(r.prompt_tokens);
    if (r.output_tokens >= 1) demand["output_tokens"] = std::lround(r.output_tokens);
  }
  w.demand_changes.emplace_back(m.name, std::move(demand));
}

void Service::observe_gpu_window_locked(StackWindow& w) {
  const std::optional<GpuReading>& gpu = w.gpu;
  for (const auto& i : gpu->issues) {
    if (i.quality == DataQuality::kUnreachable) {
      w.up = false;
      w.down = i.detail;
    }
  }
  std::vector<std::string> before;
  if (gpu_reading_) before = quality_names(gpu_reading_->issues);
  const std::vector<std::string> after = quality_names(gpu->issues);
  if (before != after) {
    w.log.push_back("GPU: " + (after.empty() ? "telemetry clean" : join(after, ", ")) +
                    (gpu->issues.empty() ? "" : " (" + gpu->issues.front().detail + ")"));
  }
  gpu_predicted_ = w.predicted;
  if (w.predicted) {
    const std::optional<double> dram_predicted =
        gpu->dram_active ? std::optional<double>(w.predicted->mem_bw_util) : std::nullopt;
    if (unexplained_.observe(*gpu->sm_active, w.predicted->sm_util, gpu->dram_active,
                             dram_predicted)) {
      char line[256];
      std::snprintf(line, sizeof line,
                    "GPU: %s: SM activity %.0f %% measured, %.0f %% predicted for plan %lld",
                    unexplained_.present() ? "unexplained load" : "unexplained load gone",
                    100 * *gpu->sm_active, 100 * w.predicted->sm_util,
                    static_cast<long long>(w.current));
      w.log.emplace_back(line);
    }
    plan_with_unexplained_load_locked(w);
  }
  gpu_reading_ = std::move(w.gpu);
}

void Service::plan_with_unexplained_load_locked(StackWindow& w) {
  if (!options_.stack.unexplained.plan_with) return;
  const Interference load = unexplained_.planned();
  if (load == controller_->gpu_load()) return;
  controller_->set_gpu_load(load);
  w.gpu_load_changed = true;
  char line[200];
  if (any_load(load)) {
    std::snprintf(line, sizeof line,
                  "GPU: planning beside the unexplained load: %.0f %% of the SMs, %.0f %% of the "
                  "DRAM bandwidth",
                  100 * load.sm_util, 100 * load.bandwidth_util);
  } else {
    std::snprintf(line, sizeof line, "GPU: planning without an unexplained load");
  }
  w.log.emplace_back(line);
}

void Service::apply_stack_window(const StackWindow& w) {
  for (const auto& line : w.log) {
    std::fprintf(stderr, "corun serve: telemetry: %s\n", line.c_str());
  }
  if (auto ok = store_->append_learning(w.in.learned); !ok) {
    std::fprintf(stderr, "corun serve: telemetry: storing what a window taught failed: %s\n",
                 ok.error().what().c_str());
  }
  if (w.in.wants.replan) planner_.request(w.in.wants.reason);
  if (w.gpu_load_changed) planner_.request("gpu load");
  for (const auto& [name, demand] : w.demand_changes) {
    auto changed = change_demand(name, demand);
    if (const auto* e = std::get_if<ApiError>(&changed)) {
      std::fprintf(stderr, "corun serve: telemetry: %s: observed demand not applied: %s\n",
                   name.c_str(), e->message.c_str());
    } else if (const auto* err = std::get_if<Error>(&changed)) {
      std::fprintf(stderr, "corun serve: telemetry: %s: observed demand not stored: %s\n",
                   name.c_str(), err->what().c_str());
    } else {
      std::fprintf(stderr, "corun serve: telemetry: %s: demand now %s (observed)\n", name.c_str(),
                   demand.dump().c_str());
    }
  }
}

void Service::stack_loop() {
  const PrometheusClient client = *prometheus_;
  double wait_s = options_.stack.read.window_s;
  MutexLock lock(state_mutex_);
  while (!stopping_) {
    const auto due = std::chrono::steady_clock::now() +
                     std::chrono::milliseconds(static_cast<std::int64_t>(wait_s * 1000));
    while (!stopping_ && stack_cv_.wait_until(lock, due)) {
    }
    if (stopping_) break;
    lock.unlock();
    // Every query of one window is evaluated at one instant, taken before the window's plan is:
    // the window then ends before that plan is read, and begins after the previous window's
    // plan was read (a window of wait_s >= window_s after it), so a window that finds the plan
    // of the previous one never holds another plan's requests, however long its queries take.
    const double at_s = static_cast<double>(unix_now_ms()) / 1000;
    read_stack_window([&client, at_s](const std::string& q) { return client.query(q, at_s); });
    lock.lock();
    // Back off while Prometheus does not answer: window × 2^k, at most max_backoff_s.
    wait_s = prometheus_up_ ? options_.stack.read.window_s
                            : std::min(2 * wait_s, options_.stack.max_backoff_s);
  }
}

json Service::stack_json_locked() const {
  json models = json::object();
  for (const auto& [name, st] : stack_status_) {
    json e = {{"at_unix_ms", st.at_unix_ms},
              {"plan_id", st.plan_id},
              {"learned", st.learned},
              {"status", st.issues.empty() ? "ok" : std::string(to_string(st.issues[0].quality))},
              {"issues", issues_json(st.issues)}};
    if (st.latency_ms_mean) e["latency_ms_mean"] = *st.latency_ms_mean;
    if (st.rps > 0) e["observed_rps"] = st.rps;
    if (st.fps > 0) e["observed_fps"] = st.fps;
    models[name] = std::move(e);
  }
  json out = {{"source", "prometheus"},
              {"url", options_.stack.prometheus_url},
              {"window_s", options_.stack.read.window_s},
              {"up", prometheus_up_},
              {"models", std::move(models)}};
  if (!prometheus_up_) out["error"] = prometheus_error_;
  if (gpu_reading_) {
    const GpuReading& g = *gpu_reading_;
    json gpu = {{"issues", issues_json(g.issues)}};
    auto put = [&](const char* k, const std::optional<double>& v) {
      if (v) gpu[k] = *v;
    };
    put("sm_active", g.sm_active);
    if (g.sm_active) gpu["sm_active_field"] = g.sm_active_field;
    put("dram_active", g.dram_active);
    put("fb_used_mib", g.fb_used_mib);
    put("power_w", g.power_w);
    put("sm_clock_mhz", g.sm_clock_mhz);
    if (gpu_predicted_) {
      gpu["predicted_sm_active"] = gpu_predicted_->sm_util;
      if (g.dram_active) gpu["predicted_dram_active"] = gpu_predicted_->mem_bw_util;
      json u = {{"present", unexplained_.present()}, {"sm_excess", unexplained_.sm_excess()}};
      if (unexplained_.dram_excess()) u["dram_excess"] = *unexplained_.dram_excess();
      // What the planner predicts every model beside (none: {0, 0}).
      const Interference planned = controller_->gpu_load();
      u["planned"] = {{"sm", planned.sm_util}, {"dram", planned.bandwidth_util}};
      gpu["unexplained_load"] = std::move(u);
    }
    out["gpu"] = std::move(gpu);
  }
  return out;
}

}  // namespace corun::serve
