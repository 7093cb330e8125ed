#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "corun/catalog/catalog.h"
#include "corun/core/context.h"
#include "corun/core/mutex.h"
#include "corun/core/result.h"
#include "corun/mapping/corunners.h"
#include "corun/mapping/tools.h"
#include "corun/plan/solver.h"
#include "corun/runtime/controller.h"
#include "corun/runtime/predictor_source.h"
#include "corun/serve/api_error.h"
#include "corun/serve/http.h"
#include "corun/serve/metrics.h"
#include "corun/serve/plan_hook.h"
#include "corun/serve/planner.h"
#include "corun/serve/registry.h"
#include "corun/serve/router.h"
#include "corun/serve/stack_telemetry.h"
#include "corun/serve/store.h"
#include "corun/serve/telemetry.h"
#include "corun/spec/workload.h"
#include "corun/testbed/testbed.h"

namespace corun::serve {

/// @brief Telemetry read from the serving stack's own metrics in Prometheus (`corun serve
/// --prometheus URL`; docs/stack.md): each window, every model with a `telemetry` source is
/// read (serve/stack_telemetry.h) and learned from as POSTed telemetry is.
struct StackTelemetryOptions {
  std::string prometheus_url;  ///< "" = no stack telemetry
  StackReadOptions read;
  /// `--dcgm gpu=0,Hostname=node-1`: the labels that select this GPU's dcgm-exporter series;
  /// empty: the GPU's metrics are not read.
  std::vector<std::pair<std::string, std::string>> dcgm_labels;
  /// Applies to POSTed telemetry too: a lone window far outside a model's noise is held.
  OutlierOptions outliers;
  /// With `dcgm_labels`: GPU activity the plan in force does not explain is reported, and
  /// planned with (UnexplainedLoadOptions::plan_with).
  UnexplainedLoadOptions unexplained;
  /// An observed demand (requests or frames per second) that differs from the registered one,
  /// on the same side, by more than this fraction (check = (0, 10]) — and by more than three
  /// Poisson standard deviations of the window's expected count, 3 / sqrt(rate × window), so
  /// that a slow model's counting noise is not a change — in `demand_windows` windows in a row
  /// (check = [1, 100]) becomes the model's demand (their median), as
  /// PUT /v1/models/{name}/demand would.
  double demand_band = 0.2;
  int demand_windows = 3;
  int timeout_ms = 5000;  ///< per query (check = [100, 60000])
  /// While Prometheus does not answer, windows are tried at window × 2^k, at most this far
  /// apart (check = [1, 3600]).
  double max_backoff_s = 300;
  /// Whether the service reads a window every `read.window_s` on a thread of its own (what
  /// `corun serve` does). false: a window is read only when read_stack_window() is called, by
  /// a program that embeds the service and knows when its deployer has applied a plan, so
  /// that it reads only windows the plan ran through (and by tests, which need the same).
  bool poll = true;
};

/// @brief Checks every field of `o` (and its read and outlier options); the error names it.
Status check(const StackTelemetryOptions& o);

/// @brief How `corun serve` runs. Every setting is declared once here; cmd_serve.cc derives
/// its flags from the same names.
struct ServiceOptions {
  std::filesystem::path state_dir;  ///< SQLite state (created if needed)
  std::string token;                ///< bearer token mutating requests must carry (non-empty)
  std::string device = "rtx3090";   ///< catalog device of a new state
  std::string workload_file;        ///< initial model set of a new state ("" = none)
  std::string solver = "ga";
  std::size_t max_body_bytes = 64 * 1024;
  /// Period of the telemetry summary flush to SQLite: the durability window of telemetry.
  int telemetry_flush_ms = 1000;
  /// Re-plans are spaced at least this far apart (a burst of events costs one re-plan).
  int min_replan_interval_ms = 200;
  std::size_t history_in_memory = 1000;  ///< plans kept for /v1/plan/history
  /// Online learning from telemetry (corrections, calibrated margins); see runtime/learner.h.
  LearningOptions learning;
  /// How plans price their changes (runtime/controller.h, docs/scheduler.md "Transitions").
  TransitionOptions transitions;
  /// Admission control (runtime/admission.h): a model whose SLA no plan holds admits the
  /// share of its demand in its plan's `admitted`, and the front end in front of it (a gateway
  /// that answers 429, a camera pipeline that drops frames) refuses the rest; its telemetry is
  /// of the admitted load. enabled = false (`--degrade best-effort`): it runs best effort with
  /// all of its demand, for a stack with no front end that can refuse.
  AdmissionOptions admission;
  /// `--on-plan CMD`: a new plan's record (with its transition) goes to CMD on standard input
  /// before the plan counts as in force; exit 0 puts it in force, anything else (or a time-out)
  /// keeps the previous plan and reports the failure (serve/plan_hook.h). Empty: no hook.
  HookOptions on_plan;
  /// `--prometheus URL`: telemetry from the serving stack's metrics (and the outlier rule,
  /// which holds for POSTed telemetry as well).
  StackTelemetryOptions stack;
};

/// @brief The scheduler as a service: the HTTP API (docs/serve.md), the registered models and
/// their durable state, and a planner thread, around one online Controller
/// (runtime/controller.h) that decides and learns — the same object `corun run` drives.
/// handle() is the whole API; transports (serve/server.h, tests) only translate requests.
/// Thread-safety: handle() may be called from many threads at once. Registrations, plans and
/// what telemetry taught are committed to the StateStore before they are acknowledged or
/// served, and a restarted service replays them.
///
/// @code
///   ServiceOptions o;
///   o.state_dir = "state";  // SQLite state, created if needed
///   o.token = "secret-token";
///   auto s = Service::open(Context{}, o, Catalog::default_catalog(),
///                          std::make_unique<TwinSource>());
///   if (!s) return s.error();
///   HttpRequest req;
///   req.method = "GET";
///   req.path = "/healthz";
///   HttpResponse r = (*s)->handle(req);  // r.status, r.body (JSON)
///   (*s)->stop();
/// @endcode
class Service final : public HttpHandler {
 public:
  /// @brief Opens the state directory, reloads models, plans and telemetry, and starts the
  /// planner and the telemetry flusher. A state without a plan gets one planned at start.
  /// @param ctx the seed of the planner and of the twin's measurements, and the solver's
  /// threads, for the service's lifetime (a tool placement draws from its scenario's seed)
  static Result<std::unique_ptr<Service>> open(const Context& ctx, ServiceOptions options,
                                               const Catalog& catalog,
                                               std::unique_ptr<PredictorSource> source);
  ~Service() override;
  Service(const Service&) = delete;
  Service& operator=(const Service&) = delete;

  /// @brief Answers one request. Never throws; malformed input gets a 4xx with a JSON error.
  HttpResponse handle(const HttpRequest& req) override;
  /// @brief A JSON error for a failure the transport detected before handle() (400, 413, 414,
  /// 431, ...). `reason` (when given) replaces the generic message; `field` names the header or
  /// part of the request to blame.
  HttpResponse transport_error(int status, const std::string& path, const std::string& reason,
                               const std::string& field) override;

  /// @brief Id of the plan in force (0 = none yet).
  [[nodiscard]] std::int64_t plan_id() const { return plan_id_.load(); }
  /// @brief Version of the model set: bumped by every registration, removal and demand update.
  [[nodiscard]] std::uint64_t generation() const {
    MutexLock lock(state_mutex_);
    return registry_.generation();
  }
  /// @brief Number of the latest decision (0 = none yet): every re-plan, whether it changed
  /// the plan in force (and its id) or not.
  [[nodiscard]] std::int64_t decision() const { return decision_.load(); }
  /// @brief Blocks until a plan with id > `after` is in force (what runs changed) or the
  /// timeout passes.
  bool wait_for_plan(std::int64_t after, int timeout_ms);
  /// @brief Blocks until a decision numbered > `after` is published or the timeout passes.
  bool wait_for_decision(std::int64_t after, int timeout_ms);
  /// @brief Stops the planner and flushes telemetry (also done by the destructor).
  void stop();
  /// @brief Reads one window of every model's stack telemetry through `query` and learns from
  /// what is clean as from POSTed telemetry (the stack poller's work each window; tests call it
  /// with a fixture). A window counts toward the plan in force only when that plan was in force
  /// at the previous window too: a window never mixes two plans, provided its queries look no
  /// further back than the previous call (the poller evaluates them all at the instant the
  /// window begins, a window's length after the previous one ended).
  void read_stack_window(const PromQuery& query) CORUN_EXCLUDES(mutate_mutex_, state_mutex_);
  /// @brief Whether the request carries the service's bearer token (constant-time compare).
  [[nodiscard]] bool authorised(const HttpRequest& req) const;
  /// @brief The request's JSON body under the API's limits (size, media type, depth), or the
  /// 4xx handle() would answer for it.
  [[nodiscard]] std::variant<nlohmann::json, ApiError> parse_body(const HttpRequest& req) const;

  /// @brief The API: one row per (method, path pattern); routing, authentication, body parsing
  /// and the request metrics' labels all derive from it, and a node of GPUs (NodeService)
  /// resolves its requests against it too.
  static std::span<const Route<Service>> routes();

 private:
  Service(const Context& ctx, ServiceOptions options, const Catalog& catalog,
          std::unique_ptr<StateStore> store);
  Status restore(const StoredState& st, std::unique_ptr<PredictorSource> source)
      CORUN_EXCLUDES(state_mutex_);
  /// Restores the registered models (the stored ones, then `initial`, stored as they are
  /// added), their telemetry and the plan history.
  Status restore_models_locked(const StoredState& st, const std::vector<nlohmann::json>& initial)
      CORUN_REQUIRES(state_mutex_);
  /// Builds the controller, replays what telemetry taught, and puts the stored plan in force.
  Status restore_controller_locked(const StoredState& st, std::unique_ptr<PredictorSource> source)
      CORUN_REQUIRES(state_mutex_) CORUN_EXCLUDES(plan_body_mutex_);

  HttpResponse route(const HttpRequest& req, std::string_view& label);
  HttpResponse error(const ApiError& e) const { return error_response(e); }
  // A state write that failed (serve/api_error.h storage_error), logged with its cause.
  HttpResponse storage_failure(const RouteCall& call, const Error& e) const;

  HttpResponse get_health(const RouteCall& call);
  HttpResponse get_metrics(const RouteCall& call);
  HttpResponse get_openapi(const RouteCall& call);
  HttpResponse list_models(const RouteCall& call);
  HttpResponse get_model(const RouteCall& call);
  HttpResponse register_model(const RouteCall& call);
  HttpResponse remove_model(const RouteCall& call);
  HttpResponse update_demand(const RouteCall& call);
  HttpResponse post_telemetry(const RouteCall& call);
  HttpResponse get_telemetry(const RouteCall& call);
  HttpResponse get_plan(const RouteCall& call);
  HttpResponse get_history(const RouteCall& call);
  HttpResponse post_replan(const RouteCall& call);
  /// POST /v1/whatif: plans the registered models plus the body (a models entry) on a copy of
  /// the workload with the controller's predictor and learners; nothing in the service changes.
  HttpResponse post_whatif(const RouteCall& call);
  /// POST /v1/tools/place: places the body's tool DAG next to the plan in force with
  /// mapping::place() (what `corun map --plan` runs); nothing in the service changes.
  HttpResponse post_tools_place(const RouteCall& call);
  /// POST /v1/capacity: how many GPUs of the served device the registered models (or the
  /// body's `models`) need, answered by the node planner on the catalog twin
  /// (runtime/node_plan.h gpus_needed); nothing in the service changes.
  HttpResponse post_capacity(const RouteCall& call);
  /// The plan in force's co-runners, measured and guarded (plan_corunners), from the cache when
  /// `key` (plan id, served models' entries, seed, device) was built before; else built and
  /// cached. The build (a surrogate fit, about a second) runs without the lock: two requests
  /// that miss together both build, and the results are equal (deterministic by seed).
  Result<std::shared_ptr<const mapping::CoRunners>> cached_corunners(
      const std::string& key, const Workload& workload, const JointConfig& config,
      std::int64_t plan_id, const Context& ctx) CORUN_EXCLUDES(corunners_mutex_);

  void flusher_loop();
  void flush_telemetry();
  void stack_loop();
  /// What the samples did: breaches counted, learning samples to store, outliers held, and
  /// whether a re-plan is due.
  struct Ingested {
    std::size_t breaches = 0;
    std::vector<std::string> learned;
    std::vector<WindowIssue> held;
    ObservationResult wants;
  };
  /// Records registered models' samples: those of the plan in force (`current`) teach the
  /// controller after the outlier rule; the others are counted only.
  Ingested ingest_locked(const std::vector<TelemetrySample>& samples, std::int64_t current)
      CORUN_REQUIRES(state_mutex_);
  /// Makes `demand` (a models entry's demand object) the demand of model `name`, durably;
  /// an ApiError for a bad demand or an unknown model, an Error when the store fails.
  std::variant<nlohmann::json, ApiError, Error> change_demand(const std::string& name,
                                                              const nlohmann::json& demand)
      CORUN_EXCLUDES(state_mutex_);
  /// Each model's last stack telemetry window (GET /v1/plan and /v1/telemetry).
  nlohmann::json stack_json_locked() const CORUN_REQUIRES(state_mutex_);
  /// The steps of read_stack_window() and the state they share (service_stack.cc).
  struct StackWindow;
  struct DemandBand;
  /// Takes what a window reads (the models with a telemetry source, the plan in force) and
  /// makes that plan the one the next window compares with.
  void begin_stack_window(StackWindow& w) CORUN_EXCLUDES(state_mutex_);
  /// Reads every model's window; false when the service stops meanwhile.
  bool read_stack_models(StackWindow& w, const PromQuery& query) CORUN_EXCLUDES(state_mutex_);
  /// Reads the GPU's DCGM window and what the catalog twin predicts of it.
  void read_stack_gpu(StackWindow& w, const PromQuery& query) const;
  /// Whether model `m`'s observed demand left the band around its registered one.
  DemandBand demand_band(const ModelSpec& m, const WindowReading& r) const;
  /// Records model `i`'s window: its status, what it teaches, and its demand streak.
  void observe_model_window_locked(StackWindow& w, std::size_t i) CORUN_REQUIRES(state_mutex_);
  /// Updates the model's stack status and learns from its window when `learn`.
  void record_stack_status_locked(StackWindow& w, const ModelSpec& m, const WindowReading& r,
                                  bool learn) CORUN_REQUIRES(state_mutex_);
  /// Counts the windows in a row out of the demand band; enough of them queue a demand change.
  void follow_observed_demand_locked(StackWindow& w, const ModelSpec& m, const WindowReading& r,
                                     const DemandBand& band) CORUN_REQUIRES(state_mutex_);
  /// Records the GPU's window and whether the plan in force explains its load.
  void observe_gpu_window_locked(StackWindow& w) CORUN_REQUIRES(state_mutex_);
  /// Tells the controller the unexplained load to plan with when the rule moved it.
  void plan_with_unexplained_load_locked(StackWindow& w) CORUN_REQUIRES(state_mutex_);
  /// Logs the window, stores what it taught, and applies the re-plan and demand changes it asks.
  void apply_stack_window(const StackWindow& w) CORUN_EXCLUDES(mutate_mutex_, state_mutex_);
  /// One re-plan (the planner thread's work): decide, store, then publish.
  Status plan_once(const std::string& reason)
      CORUN_EXCLUDES(mutate_mutex_, state_mutex_, plan_body_mutex_);
  /// The steps of plan_once() and the record they build (service_plan.cc).
  struct PlanDraft;
  /// Records an empty plan: nothing is registered (its id continues the sequence).
  void record_empty_plan(PlanDraft& p);
  /// Asks the controller for a decision and records it; false when the model set changed
  /// during the search (another decision is requested).
  Result<bool> record_decision(const std::string& reason, PlanDraft& p);
  /// Runs the --on-plan hook on a plan that changes what runs; false when it did not apply it
  /// (the previous plan stays in force).
  bool run_on_plan_hook(PlanDraft& p) CORUN_EXCLUDES(state_mutex_, plan_body_mutex_);
  /// Puts the plan in force before the decision back and reports the hook's refusal.
  void keep_plan_in_force(const PlanDraft& p, const nlohmann::json& outcome)
      CORUN_EXCLUDES(state_mutex_, plan_body_mutex_);
  /// Stores the plan, then makes it the one GET /v1/plan serves, unless the model set changed.
  Status publish_plan(std::uint64_t generation, PlanDraft& p)
      CORUN_EXCLUDES(mutate_mutex_, state_mutex_, plan_body_mutex_);
  bool wait_for(const std::atomic<std::int64_t>& counter, std::int64_t after, int timeout_ms);
  nlohmann::json learning_json() const;

  const Context ctx_;
  ServiceOptions options_;
  const Catalog* catalog_;
  /// The `catalog` member of GET /v1/plan (export/catalog_record.h): the overlay this service
  /// was opened with, so that `corun export` of a served plan finds it without a second flag.
  std::string catalog_record_;
  std::unique_ptr<StateStore> store_;
  std::unique_ptr<Controller> controller_;
  Device device_;
  Metrics metrics_;
  /// The tools a placement may call (the catalog's tools.yaml); none when the catalog has none
  /// (`tools_error_` says why, and POST /v1/tools/place answers 503). Read-only after open().
  std::optional<mapping::ToolCatalog> tools_;
  std::string tools_error_;
  /// The catalog twin (`sim`: the simulator on the catalog's description of the device), what
  /// the service knows of its GPU: it measures the plan in force's load for a tool placement
  /// and predicts the co-runners' SLAs during the tools' burst. measure() is thread-safe.
  std::unique_ptr<Testbed> twin_;
  /// The co-runners of the last placements' plans (most recent last, at most
  /// kCoRunnersCached), keyed as cached_corunners() says: a placement on an unchanged plan
  /// reuses the guard's fit instead of paying it again.
  static constexpr std::size_t kCoRunnersCached = 4;
  Mutex corunners_mutex_;
  std::deque<std::pair<std::string, std::shared_ptr<const mapping::CoRunners>>> corunners_cache_
      CORUN_GUARDED_BY(corunners_mutex_);

  /// Serialises mutations (registration, removal, demand) with their durable writes, so that
  /// the store and memory agree. Never held by telemetry handlers.
  Mutex mutate_mutex_;
  /// Guards the in-memory state below; held only for short, allocation-light sections.
  mutable Mutex state_mutex_ CORUN_ACQUIRED_AFTER(mutate_mutex_);
  ModelRegistry registry_ CORUN_GUARDED_BY(state_mutex_);
  nlohmann::json plan_ CORUN_GUARDED_BY(state_mutex_);
  /// The decision plan_ records, held as the controller made it (or as restored once from the
  /// store), with the names of the models it was made for in its configuration's order:
  /// requests read it instead of parsing plan_ back. Null when no plan of models is in force.
  struct InForce {
    std::vector<std::string> names;
    std::shared_ptr<const Decision> decision;
  };
  std::shared_ptr<const InForce> in_force_ CORUN_GUARDED_BY(state_mutex_);
  /// The plan in force for the registered models: its id and its configuration in the
  /// registry's order, when it covers exactly the registered models and each index is one of
  /// the model's configurations as registered now (decision_in_force()'s rule); none otherwise
  /// (the model set changed and a re-plan is under way).
  [[nodiscard]] std::optional<std::pair<std::int64_t, JointConfig>> config_in_force_locked() const
      CORUN_REQUIRES(state_mutex_);
  std::deque<nlohmann::json> history_ CORUN_GUARDED_BY(state_mutex_);
  TelemetryLedger telemetry_ CORUN_GUARDED_BY(state_mutex_);
  bool stopping_ CORUN_GUARDED_BY(state_mutex_) = false;
  /// The plan in force, serialised once when it is published; GET /v1/plan shares it.
  Mutex plan_body_mutex_;
  std::shared_ptr<const std::string> plan_body_ CORUN_GUARDED_BY(plan_body_mutex_);
  CondVar plan_cv_;
  CondVar flusher_cv_;
  std::atomic<std::int64_t> plan_id_{0};
  std::atomic<std::int64_t> decision_{0};  ///< see decision()
  /// When the service started: the controller's clock (dwell times, the horizon's events).
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();

  /// Stack telemetry (options_.stack): the last window of each model, its outlier rule and how
  /// many windows in a row its observed demand left the band.
  struct StackStatus {
    std::int64_t at_unix_ms = 0;
    std::int64_t plan_id = 0;
    bool learned = false;
    std::vector<WindowIssue> issues;
    std::optional<double> latency_ms_mean;
    double rps = 0, fps = 0;
  };
  std::map<std::string, StackStatus> stack_status_ CORUN_GUARDED_BY(state_mutex_);
  /// Each model's outlier rule, with the plan it judges windows of: a new plan (other
  /// configurations, other co-runners) starts a new history.
  std::map<std::string, std::pair<std::int64_t, OutlierGate>> outliers_
      CORUN_GUARDED_BY(state_mutex_);
  /// Per model: the observed rates of the windows in a row that left the demand band (signed
  /// by side: all above or all below).
  std::map<std::string, std::vector<double>> demand_streak_ CORUN_GUARDED_BY(state_mutex_);
  /// The plan in force at the previous window (-1: none read yet).
  std::int64_t stack_plan_id_ CORUN_GUARDED_BY(state_mutex_) = -1;
  /// Whether Prometheus answered the last window (health "degraded" when not).
  bool prometheus_up_ CORUN_GUARDED_BY(state_mutex_) = true;
  std::string prometheus_error_ CORUN_GUARDED_BY(state_mutex_);
  std::optional<GpuReading> gpu_reading_ CORUN_GUARDED_BY(state_mutex_);
  /// What the catalog twin predicts of the GPU for the plan in force (its last window), and
  /// the rule that compares it with DCGM's measurement.
  std::optional<GpuState> gpu_predicted_ CORUN_GUARDED_BY(state_mutex_);
  UnexplainedLoad unexplained_ CORUN_GUARDED_BY(state_mutex_);
  std::optional<PrometheusClient> prometheus_;
  CondVar stack_cv_;

  PlannerThread planner_;
  std::thread flusher_;
  std::thread stack_poller_;
};

}  // namespace corun::serve
