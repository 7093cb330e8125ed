// corun serve: the scheduler as an HTTP/JSON service (docs/serve.md).
#include <signal.h>
#include <sys/stat.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>

#include "command.h"
#include "common.h"
#include "corun/catalog/gpu_detect.h"
#include "corun/core/atomic_file.h"
#include "corun/core/strings.h"
#include "corun/runtime/twin_source.h"
#include "corun/serve/kube_registrar.h"
#include "corun/serve/node_service.h"
#include "corun/serve/server.h"
#include "corun/serve/service.h"
#include "corun/spec/node.h"
#include "node_report.h"
#include "surrogate_flags.h"

namespace corun::cli::cmd_serve {
namespace {

// The bearer token: from --token-file, or a fresh random one kept in STATE/token (mode 0600).
Result<std::string> load_token(const std::string& token_file, const std::filesystem::path& state) {
  if (!token_file.empty()) {
    auto text = read_file(token_file);
    if (!text) return text.error().wrap("--token-file");
    std::string t(trim(*text));
    if (t.size() < 16) return Error("--token-file: the token must have at least 16 characters");
    return t;
  }
  const auto path = state / "token";
  if (std::filesystem::exists(path)) {
    auto text = read_file(path);
    if (!text) return text.error();
    return std::string(trim(*text));
  }
  std::random_device rd;
  std::string t;
  const char* hex = "0123456789abcdef";
  for (int i = 0; i < 32; ++i) t += hex[rd() % 16];
  std::error_code ec;
  std::filesystem::create_directories(state, ec);
  auto ok = write_file_atomic(path, t + "\n");
  if (!ok) return ok.error();
  ::chmod(path.c_str(), S_IRUSR | S_IWUSR);
  return t;
}

// A new node state's first model sets: the node planner places the workload's models (on the
// catalog twin, as `corun run` does on a node), and each GPU's share is written as the workload
// its service starts with (STATE/gpuK/workload.yaml).
Result<std::vector<std::string>> place_initial(const Context& ctx, const Workload& w,
                                               const std::string& file,
                                               const std::filesystem::path& state,
                                               const std::string& solver) {
  auto text = read_file(file);
  if (!text) return text.error();
  PlanFlags pf;
  pf.file = file;
  pf.solver = solver;
  auto session = make_node_session(ctx, w, pf);
  if (!session) return session.error();
  auto plan = (*session)->planner->plan();
  if (!plan) return plan.error();
  auto [on, unplaced] = models_by_unit(w, *plan);
  if (!unplaced.empty()) {
    return Error(file + ": models: no GPU of the node can hold " + join(unplaced, ", ") +
                     " (memory or pins)",
                 Error::Kind::kInvalidInput);
  }
  std::vector<std::string> files(on.size());
  for (std::size_t u = 0; u < on.size(); ++u) {
    if (on[u].empty()) continue;
    const GpuUnit& unit = plan->layout.units[u];
    auto unit_text = unit_workload_text(*text, w, unit, on[u]);
    if (!unit_text) return unit_text.error();
    const auto dir = serve::NodeService::unit_dir(state, unit.gpu);
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return Error("cannot create " + dir.string() + ": " + ec.message(), Error::Kind::kIo);
    const auto path = dir / "workload.yaml";
    if (auto ok = write_file_atomic(path, *unit_text); !ok) return ok.error();
    files[unit.gpu] = path.string();
    std::string names;
    for (std::size_t m : on[u]) names += (names.empty() ? "" : ", ") + w.models[m].name;
    std::fprintf(stderr, "corun serve: %s starts with %s\n", unit.label().c_str(), names.c_str());
  }
  return files;
}

// How many GPUs the service serves: a node state keeps its count; a node workload (`gpus`)
// or --gpus makes a new state a node. 1 = the single-GPU service. MIG slices are not served.
// `stored`: the state's node GPU count (NodeService::stored_gpus), none for a new or
// single-GPU state.
Result<std::size_t> served_gpus(const std::filesystem::path& state,
                                std::optional<std::size_t> stored, const Workload* w,
                                std::optional<std::size_t> flag) {
  std::size_t gpus = stored.value_or(1);
  const char* from = stored ? "the state" : nullptr;
  auto agree = [&](std::size_t n, const char* source) -> Status {
    if (from != nullptr && n != gpus) {
      return Error(std::string(source) + " says " + std::to_string(n) + " GPU(s), " + from + " " +
                       std::to_string(gpus),
                   Error::Kind::kInvalidInput);
    }
    gpus = n;
    from = source;
    return {};
  };
  if (w != nullptr && !w->node.single_gpu()) {
    for (const auto& options : w->node.options) {
      for (const auto& partition : options) {
        if (!partition.empty()) {
          return Error(w->file +
                           ": mig: corun serve runs whole GPUs; plan or run MIG slices with "
                           "'corun plan' or 'corun run'",
                       Error::Kind::kInvalidInput);
        }
      }
    }
    if (auto ok = agree(w->node.gpus(), "--workload"); !ok) return ok.error();
  }
  if (flag) {
    if (auto ok = agree(*flag, "--gpus"); !ok) return ok.error();
  }
  if (gpus > 1 && !stored && std::filesystem::exists(state / "serve.db")) {
    return Error(state.string() + " holds a single-GPU service; give a new --state for a node",
                 Error::Kind::kInvalidInput);
  }
  return gpus;
}

// "30s", "2m", "1h" or a number of seconds.
std::optional<double> parse_duration_s(const std::string& text) {
  if (text.empty()) return std::nullopt;
  double unit = 1;
  std::string number = text;
  switch (text.back()) {
    case 's':
      number.pop_back();
      break;
    case 'm':
      unit = 60;
      number.pop_back();
      break;
    case 'h':
      unit = 3600;
      number.pop_back();
      break;
    default:
      break;
  }
  char* end = nullptr;
  const double v = std::strtod(number.c_str(), &end);
  if (number.empty() || *end != '\0' || !std::isfinite(v) || v <= 0) return std::nullopt;
  return v * unit;
}

bool is_loopback(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "::1";
}

// The flags of corun serve.
struct Flags {
  std::string state, host = "127.0.0.1", port_file, token_file, device = "rtx3090", workload,
                     solver = "ga", catalog, surrogate;
  int port = 8080, threads = kDefaultHttpThreads, flush_ms = 1000, min_replan_ms = 200;
  std::size_t gpus = 0;  // 0 = not given
  std::uint64_t seed = kDefaultSeed;
  double margin = 0.1;
  std::size_t max_body = 64 * 1024;
  LearningFlags learning;
  DegradeFlag degrade;
  std::string transitions = "aware", on_plan;
  int on_plan_timeout_ms = 30000;
  std::string prometheus, window = "30s", dcgm;
  bool dcgm_report_only = false;
  double min_requests = 20;
  std::string kube_node;
  KubeFlags kube;
  serve::KubeRegistrarOptions registrar;
};

// What the flags decide before any thread starts.
struct CheckedFlags {
  double window_s = 0;                    // the telemetry window of --window
  std::optional<serve::KubeClient> kube;  // the client of --kube-node, when given
};

/// Checks the flags that need no file, and makes the Kubernetes client of --kube-node.
Result<CheckedFlags> check_serve_flags(const Flags& f) {
  CheckedFlags out;
  if (f.transitions != "aware" && f.transitions != "ignore") {
    return Error("--transitions: expected aware or ignore, got '" + f.transitions + "'");
  }
  const auto window = parse_duration_s(f.window);
  if (!window) {
    return Error("--window: expected a duration such as 30s or 2m, got '" + f.window + "'",
                 Error::Kind::kInvalidInput);
  }
  out.window_s = *window;
  if (f.on_plan_timeout_ms <= 0) {
    return Error("--on-plan-timeout-ms: must be > 0, got " + std::to_string(f.on_plan_timeout_ms));
  }
  if (!is_loopback(f.host) && f.token_file.empty()) {
    return Error("--host " + f.host + " is not loopback: give --token-file");
  }
  if (!f.kube_node.empty()) {
    auto client = f.kube.client();
    if (!client) return client.error().wrap("--kube-node");
    out.kube = std::move(*client);
  } else if (!f.kube.api.empty()) {
    return Error("--kube-api needs --kube-node NAME", Error::Kind::kInvalidInput);
  }
  return out;
}

// What the state serves, and for whom.
struct Served {
  const Catalog* catalog = nullptr;
  std::optional<Workload> workload;   // --workload's, when given
  std::optional<std::size_t> stored;  // the state's node GPU count (NodeService::stored_gpus)
  std::size_t gpus = 1;               // GPUs served (served_gpus)
  std::string token;
  bool learning = true;  // --learning on
};

/// Loads the catalog, names the device of --device auto, and decides what the state serves:
/// its workload, its GPUs, its token and whether it learns.
Result<Served> decide_served(Flags& f) {
  Served out;
  auto catalog = load_catalog(f.catalog);
  if (!catalog) return catalog.error();
  out.catalog = *catalog;
  if (f.device == "auto") {
    auto detected = detect_catalog_device(**catalog, nvml_library());
    if (!detected) return detected.error();
    std::fprintf(stderr, "corun serve: --device auto: GPU 0 is %s\n", detected->c_str());
    f.device = *detected;
  }
  // What the state will serve, decided before anything is written to it.
  if (!f.workload.empty()) {
    auto w = load_workload(f.workload, **catalog);
    if (!w) return w.error();
    out.workload = std::move(*w);
  }
  const auto stored = serve::NodeService::stored_gpus(f.state);
  if (!stored) return stored.error();
  out.stored = *stored;
  auto gpus = served_gpus(f.state, *stored, out.workload ? &*out.workload : nullptr,
                          f.gpus > 0 ? std::optional<std::size_t>(f.gpus) : std::nullopt);
  if (!gpus) return gpus.error();
  out.gpus = *gpus;
  auto token = load_token(f.token_file, f.state);
  if (!token) return token.error();
  out.token = *token;
  const auto modes = f.learning.parsed(false);
  if (!modes) return modes.error();
  out.learning = modes->front();
  return out;
}

/// The service's options from the flags; an error names a bad --dcgm.
Result<serve::ServiceOptions> service_options(const Flags& f, const std::string& token,
                                              double window_s, bool learning) {
  serve::ServiceOptions so;
  so.state_dir = f.state;
  so.token = token;
  so.device = f.device;
  so.workload_file = f.workload;
  so.solver = f.solver;
  so.max_body_bytes = f.max_body;
  so.telemetry_flush_ms = f.flush_ms;
  so.min_replan_interval_ms = f.min_replan_ms;
  so.learning = f.learning.options;
  so.learning.enabled = learning;
  so.transitions.aware = f.transitions == "aware";
  so.admission.enabled = f.degrade.shed();
  so.on_plan.command = f.on_plan;
  so.on_plan.timeout_ms = f.on_plan_timeout_ms;
  so.stack.prometheus_url = f.prometheus;
  so.stack.read.window_s = window_s;
  // SLAs are judged per telemetry window: a swap that breaches loses whole windows.
  if (!f.prometheus.empty()) so.transitions.window_s = window_s;
  so.stack.read.min_requests = f.min_requests;
  if (!f.dcgm.empty()) {
    if (f.prometheus.empty()) {
      return Error("--dcgm needs --prometheus", Error::Kind::kInvalidInput);
    }
    for (const auto& kv : split(f.dcgm, ',')) {
      const auto eq = kv.find('=');
      if (eq == std::string::npos || !is_prometheus_label_name(kv.substr(0, eq))) {
        return Error("--dcgm: expected label=value pairs separated by commas "
                     "(gpu=0,Hostname=node-1), got '" + kv + "'",
                     Error::Kind::kInvalidInput);
      }
      so.stack.dcgm_labels.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
    }
  }
  if (f.dcgm_report_only && f.dcgm.empty()) {
    return Error("--dcgm-report-only needs --dcgm", Error::Kind::kInvalidInput);
  }
  so.stack.unexplained.plan_with = !f.dcgm_report_only;
  return so;
}

// The service behind the HTTP server, and how to stop it.
struct OpenService {
  std::unique_ptr<serve::HttpHandler> handler;
  std::function<void()> stop;
};

/// Opens the service: a node of `served.gpus` GPUs (a new one placed from its workload), or
/// the single-GPU service.
Result<OpenService> open_service(const Context& ctx, const Flags& f, serve::ServiceOptions so,
                                 const Served& served,
                                 const serve::NodeService::SourceFactory& make_source) {
  OpenService out;
  if (served.gpus > 1) {
    std::vector<std::string> initial;
    if (served.workload && !served.stored.has_value()) {
      auto placed = place_initial(ctx, *served.workload, f.workload, f.state, f.solver);
      if (!placed) return placed.error();
      initial = std::move(*placed);
    }
    if (served.workload) so.device = served.workload->device.name;
    so.workload_file.clear();
    auto node =
        serve::NodeService::open(ctx, so, served.gpus, initial, *served.catalog, make_source);
    if (!node) return node.error();
    std::fprintf(stderr, "corun serve: a node of %zu GPU(s), one planner and learner each\n",
                 served.gpus);
    auto* raw = node->get();
    out.stop = [raw] { raw->stop(); };
    out.handler = std::move(*node);
  } else {
    auto source = make_source();
    if (!source) return source.error();
    auto service = serve::Service::open(ctx, std::move(so), *served.catalog, std::move(*source));
    if (!service) return service.error();
    auto* raw = service->get();
    out.stop = [raw] { raw->stop(); };
    out.handler = std::move(*service);
  }
  return out;
}

/// Serves the state over HTTP until SIGINT or SIGTERM.
int run_serve(Flags& f) {
  auto checked = check_serve_flags(f);
  if (!checked) return report_error(checked.error());
  std::optional<serve::KubeClient>& kube = checked->kube;
  // Block the stop signals before any thread starts, so that only sigwait() sees them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto served = decide_served(f);
  if (!served) return report_error(served.error());
  // --threads is the HTTP server's: the solver runs on the Context's default threads.
  const Context ctx{f.seed, kDefaultThreads};
  const TwinOptions twin{f.margin, 10};
  auto make_source = [&f, ctx, twin]() -> Result<std::unique_ptr<PredictorSource>> {
    if (f.surrogate.empty()) {
      return std::unique_ptr<PredictorSource>(std::make_unique<TwinSource>(twin));
    }
    auto s = surrogate::Surrogate::load(f.surrogate);
    if (!s) return s.error();
    auto fitted = FittedOrTwinSource::on_own_testbed(ctx, std::move(*s), {3, 10}, twin);
    if (!fitted) return fitted.error();
    return std::unique_ptr<PredictorSource>(std::move(*fitted));
  };
  auto so = service_options(f, served->token, checked->window_s, served->learning);
  if (!so) return report_error(so.error());

  if (auto ok = serve::check(so->stack); !ok) return report_error(ok.error());
  auto service = open_service(ctx, f, std::move(*so), *served, make_source);
  if (!service) return report_error(service.error());
  serve::ServerOptions http;
  http.host = f.host;
  http.port = f.port;
  http.threads = f.threads;
  http.max_body_bytes = f.max_body;
  serve::HttpServer server(*service->handler, http);
  if (auto ok = start_server(server, f.port_file); !ok) return report_error(ok.error());
  std::fprintf(stderr, "corun serve: listening on http://%s:%d (state %s, token %s)\n",
               f.host.c_str(), server.port(), f.state.c_str(),
               f.token_file.empty() ? (f.state + "/token").c_str() : f.token_file.c_str());
  std::fflush(stderr);
  std::unique_ptr<serve::KubeRegistrar> registrar;
  if (kube) {
    f.registrar.node = f.kube_node;
    const std::string api = kube->config().url;
    registrar = std::make_unique<serve::KubeRegistrar>(*service->handler, served->token,
                                                       std::move(*kube), f.registrar);
    registrar->start();
    std::fprintf(stderr, "corun serve: following the annotated pods of node %s at %s\n",
                 f.kube_node.c_str(), api.c_str());
    std::fflush(stderr);
  }
  int sig = 0;
  sigwait(&stop_signals, &sig);
  std::fprintf(stderr, "corun serve: stopping (signal %d)\n", sig);
  if (registrar) registrar->stop();
  server.stop();
  service->stop();
  return kExitOk;
}

const bool registered = register_command({
    "serve",
    "Serve the scheduler over HTTP/JSON: models, telemetry, plans (docs/serve.md)",
    [](CLI::App& sub) {
      auto f = std::make_shared<Flags>();
      sub.add_option("--state", f->state, "state directory (SQLite, created if needed)")
          ->required();
      add_listen_flags(sub, f->host, f->port, f->port_file);
      sub.add_option("--token-file", f->token_file,
                     "file holding the bearer token for mutating requests (default: a random "
                     "token kept in STATE/token)");
      sub.add_option("--device", f->device,
                     "catalog device of a new state, or auto: GPU 0 as NVML names it, mapped to "
                     "the catalog (NVML from CORUN_NVML_LIBRARY, else libnvidia-ml.so.1)")
          ->capture_default_str();
      sub.add_option("--workload", f->workload,
                     "workload whose models a new state starts with (a node workload, `gpus: "
                     "N`, makes a node: its models are placed on the GPUs)");
      sub.add_option("--gpus", f->gpus,
                     "serve a node of this many whole GPUs (one state, planner and learner per "
                     "GPU; default: the state's, the workload's, else 1)")
          ->check(CLI::Range(1, 64));
      sub.add_option("--solver", f->solver, "ga, exhaustive, exact, greedy, hillclimb")
          ->capture_default_str();
      add_seed_flag(sub, f->seed, "the solver and the twin");
      sub.add_option("--surrogate", f->surrogate,
                     "fitted surrogate (corun fit / corun run) used while the registered models "
                     "are the ones it was fitted on; the twin otherwise");
      sub.add_option("--margin", f->margin, "latency margin of the twin predictor")
          ->check(CLI::Range(0.0, 5.0))
          ->capture_default_str();
      add_threads_flag(sub, f->threads, "the HTTP server's workers", 2);
      sub.add_option("--max-body", f->max_body, "largest request body, bytes")
          ->check(CLI::Range(1024, 16 * 1024 * 1024))
          ->capture_default_str();
      sub.add_option("--flush-ms", f->flush_ms,
                     "telemetry summary flush period (durability window)")
          ->check(CLI::Range(50, 60000))
          ->capture_default_str();
      sub.add_option("--min-replan-ms", f->min_replan_ms, "least time between two re-plans")
          ->check(CLI::Range(0, 600000))
          ->capture_default_str();
      sub.add_option("--catalog", f->catalog, kCatalogFlagHelp);
      f->learning.add(sub, false);
      f->degrade.add(sub);
      sub.add_option("--transitions", f->transitions,
                     "aware: a change is made only when its gain over the horizon pays for its "
                     "restart or reload (docs/scheduler.md, Transitions); ignore: every change "
                     "is free to the planner")
          ->capture_default_str();
      sub.add_option("--on-plan", f->on_plan,
                     "shell command run with each new plan's record (JSON, with its transition) "
                     "on standard input before the plan counts as in force: exit 0 puts it in "
                     "force; anything else, or a time-out, keeps the previous plan (docs/serve.md)");
      sub.add_option("--on-plan-timeout-ms", f->on_plan_timeout_ms,
                     "time the --on-plan command may take before it is killed and the plan "
                     "counts as not applied")
          ->capture_default_str();
      sub.add_option("--prometheus", f->prometheus,
                     "read telemetry from the serving stack's metrics in this Prometheus "
                     "(http://host:port), each window, for every model with a telemetry source "
                     "(docs/stack.md)");
      sub.add_option("--window", f->window,
                     "telemetry window with --prometheus: rates and p95s are over it (30s, 2m)")
          ->capture_default_str();
      sub.add_option("--dcgm", f->dcgm,
                     "with --prometheus, also read this GPU's dcgm-exporter metrics: the labels "
                     "that select its series, e.g. gpu=0,Hostname=node-1; GPU activity the "
                     "plan does not explain is then planned with (docs/stack.md)");
      sub.add_flag("--dcgm-report-only", f->dcgm_report_only,
                   "with --dcgm, report GPU activity the plan does not explain without planning "
                   "with it");
      sub.add_option("--min-requests", f->min_requests,
                     "with --prometheus, a window with fewer completed requests is not learned "
                     "from (its p95 would be its maximum)")
          ->capture_default_str();
      sub.add_option("--kube-node", f->kube_node,
                     "register the models of the pods bound to this Kubernetes node that carry "
                     "the corun.io/model annotation, and remove them when their pods go "
                     "(README, Kubernetes)");
      f->kube.add(sub);
      sub.add_option("--kube-scheduler", f->registrar.scheduler,
                     "with --kube-node: the scheduler whose extender checks a pod's fit; pods "
                     "another scheduler placed are registered flagged unchecked")
          ->capture_default_str();
      sub.add_option("--kube-reservation-s", f->registrar.reservation_s,
                     "with --kube-node: a model the extender reserved for a pod that does not "
                     "appear on this node is removed after this many seconds")
          ->check(CLI::Range(5, 3600))
          ->capture_default_str();
      return std::function<int()>([f] { return run_serve(*f); });
    },
});

}  // namespace
}  // namespace corun::cli::cmd_serve
