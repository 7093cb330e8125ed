#include "common.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>

#include "corun/core/atomic_file.h"
#include "corun/core/strings.h"
#include "corun/export/catalog_record.h"

namespace corun::cli {

Result<const Catalog*> load_catalog(const std::string& dir) {
  if (dir.empty()) return &Catalog::default_catalog();
  static std::map<std::string, std::unique_ptr<Catalog>> loaded;
  auto it = loaded.find(dir);
  if (it != loaded.end()) return it->second.get();
  auto c = Catalog::load_overlay(dir);
  if (!c) return c.error().wrap("loading catalog " + dir);
  auto* ptr = loaded.emplace(dir, std::make_unique<Catalog>(std::move(*c))).first->second.get();
  return ptr;
}

Result<const Catalog*> load_catalog_for_plan(const std::string& dir, const std::string& plan_file) {
  if (!dir.empty() || plan_file.empty()) return load_catalog(dir);
  auto text = read_file(plan_file);
  if (!text) return load_catalog(dir);  // reading the plan reports it, with its own message
  auto recorded = exporting::read_catalog_record(*text, plan_file);
  if (!recorded) return recorded.error();
  if (!*recorded) return load_catalog(dir);
  const CatalogOverlay& overlay = **recorded;
  std::error_code ec;
  if (!std::filesystem::is_directory(overlay.dir, ec)) {
    return Error(plan_file + ": catalog.overlay: the plan was made with the catalog overlay " +
                     overlay.dir + " (hash " + overlay.hash +
                     "), which is no longer there; give --catalog DIR with a copy of it",
                 Error::Kind::kNotFound);
  }
  auto catalog = load_catalog(overlay.dir);
  if (!catalog) return catalog.error().wrap(plan_file + ": catalog.overlay");
  const std::string warning = exporting::overlay_change_warning(overlay, **catalog, plan_file);
  if (!warning.empty()) std::fprintf(stderr, "corun: warning: %s\n", warning.c_str());
  return catalog;
}

Result<Workload> load_workload_file(const std::string& path, const std::string& catalog_dir) {
  auto catalog = load_catalog(catalog_dir);
  if (!catalog) return catalog.error();
  return load_workload(path, **catalog);
}

Status require_one_gpu(const Workload& w, std::string_view verb) {
  if (w.node.single_gpu()) return Status();
  return Error(w.file + ": gpus/mig: 'corun " + std::string(verb) + "' runs one whole GPU; this " +
                   "workload describes a node of " + std::to_string(w.node.gpus()) +
                   " GPU(s)" + (w.node.layout_count() > 1 || !w.node.options[0][0].empty()
                                    ? " with MIG slices"
                                    : "") +
                   " (plan it with 'corun plan', run it online with 'corun run', compare placements "
                   "with 'corun eval node')",
               Error::Kind::kInvalidInput);
}

Status require_no_tools(const Workload& w, std::string_view verb) {
  if (!w.tools) return Status();
  return Error(w.file + ":" + std::to_string(w.tools->line) + ": tools: 'corun " +
                   std::string(verb) +
                   "' measures steady windows only and cannot hold a plan through a declared "
                   "tool burst; plan this workload with 'corun plan --measure', which plans and "
                   "measures it during the burst",
               Error::Kind::kInvalidInput);
}

Result<JointConfig> parse_config_flag(const Workload& w, const std::string& config,
                                      const std::string& only) {
  JointConfig c(w.models.size(), 0);
  std::vector<std::string> names;
  for (const auto& m : w.models) names.push_back(m.name);
  if (!only.empty()) {
    std::fill(c.begin(), c.end(), kAbsent);
    for (const auto& n : split(only, ',')) {
      const auto i = w.find_model(n);
      if (!i) return Error("--models: no model '" + n + "' in the workload" + did_you_mean(n, names));
      c[*i] = 0;
    }
  }
  if (config.empty()) return c;
  std::map<std::size_t, std::vector<std::pair<std::string, std::string>>> per_model;
  for (const auto& item : split(config, ',')) {
    const auto eq = item.find('=');
    const auto dot = item.find('.');
    if (eq == std::string::npos || dot == std::string::npos || dot > eq) {
      return Error("--config: expected MODEL.KNOB=VALUE, got '" + item + "'");
    }
    const std::string model = item.substr(0, dot);
    const auto i = w.find_model(model);
    if (!i) return Error("--config: no model '" + model + "' in the workload" + did_you_mean(model, names));
    per_model[*i].emplace_back(item.substr(dot + 1, eq - dot - 1), item.substr(eq + 1));
  }
  for (const auto& [i, assignments] : per_model) {
    if (c[i] == kAbsent) {
      return Error("--config sets knobs of '" + w.models[i].name + "', which --models leaves out");
    }
    auto l = w.models[i].find_config(assignments);
    if (!l) return l.error().wrap("--config");
    c[i] = static_cast<std::int32_t>(*l);
  }
  return c;
}

namespace {

nlohmann::json opt(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

nlohmann::json num(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

}  // namespace

std::string sla_text(const ModelSpec& m) {
  std::string out;
  auto add = [&](const char* name, const std::optional<double>& v) {
    if (v) out += (out.empty() ? "" : " ") + std::string(name) + "<=" + fixed(*v, 0);
  };
  add("p95", m.sla.latency_ms_p95);
  add("ttft", m.sla.ttft_ms_p95);
  add("tpot", m.sla.tpot_ms_p95);
  if (m.sla.min_throughput) {
    out += (out.empty() ? "" : " ") + std::string("thr>=") + fixed(*m.sla.min_throughput, 0);
  }
  return out.empty() ? "-" : out;
}

nlohmann::json to_json(const Measurement& m) {
  nlohmann::json j;
  j["testbed"] = m.testbed;
  j["device"] = m.device;
  j["models"] = nlohmann::json::array();
  for (const auto& mm : m.models) {
    j["models"].push_back({{"name", mm.name},
                           {"config", mm.config},
                           {"latency_ms_p50", mm.ok() ? num(mm.latency_ms_p50) : nullptr},
                           {"latency_ms_p95", mm.ok() ? num(mm.latency_ms_p95) : nullptr},
                           {"throughput", mm.ok() ? num(mm.throughput) : nullptr},
                           {"ttft_ms_p95", opt(mm.ttft_ms_p95)},
                           {"tpot_ms_p95", opt(mm.tpot_ms_p95)},
                           {"preemptions_per_request", opt(mm.preemptions_per_request)},
                           {"error", mm.ok() ? nlohmann::json(nullptr) : nlohmann::json(mm.error)}});
  }
  j["gpu"] = {{"sm_util", m.gpu.sm_util},
              {"mem_bw_util", m.gpu.mem_bw_util},
              {"vram_used_gb", m.gpu.vram_used_gb},
              {"power_w", m.gpu.power_w},
              {"clock_mhz", m.gpu.clock_mhz}};
  j["error"] = m.ok() ? nlohmann::json(nullptr) : nlohmann::json(m.error);
  return j;
}

std::string Table::render() const {
  std::vector<std::size_t> width(header_.size(), 0);
  auto widen = [&](const std::vector<std::string>& row) {
    for (std::size_t i = 0; i < row.size() && i < width.size(); ++i) {
      width[i] = std::max(width[i], row[i].size());
    }
  };
  widen(header_);
  for (const auto& r : rows_) widen(r);
  auto line = [&](const std::vector<std::string>& row) {
    std::string out;
    for (std::size_t i = 0; i < width.size(); ++i) {
      std::string cell = i < row.size() ? row[i] : "";
      if (i) out += "  ";
      out += cell + std::string(width[i] - cell.size(), ' ');
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::string out = line(header_);
  std::size_t total = 0;
  for (auto w : width) total += w + 2;
  out += std::string(total > 2 ? total - 2 : 0, '-') + "\n";
  for (const auto& r : rows_) out += line(r);
  return out;
}

std::string testbed_help() {
  return "testbed: " + join(testbed_names(), ", ");
}

nlohmann::json count_json(const ConfigCount& c) {
  if (c.exact()) return c.value();
  return std::isfinite(c.approx()) ? nlohmann::json(c.approx()) : nlohmann::json(nullptr);
}

std::string count_text(const ConfigCount& c) {
  return c.exact() ? c.to_string() : c.to_string() + " (not exact)";
}

std::string fixed(double v, int digits) {
  if (!std::isfinite(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

void add_listen_flags(CLI::App& sub, std::string& host, int& port, std::string& port_file) {
  sub.add_option("--host", host, "address to bind")->capture_default_str();
  sub.add_option("--port", port, "port to bind (0 = any free port)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  sub.add_option("--port-file", port_file, "write the bound port to this file");
}

CLI::Option* add_seed_flag(CLI::App& sub, std::uint64_t& seed, const std::string& what) {
  return sub
      .add_option("--seed", seed,
                  "seed of " + what + " (the same seed and inputs give the same result)")
      ->capture_default_str();
}

CLI::Option* add_threads_flag(CLI::App& sub, int& threads, const std::string& what, int min) {
  return sub.add_option("--threads", threads, "threads for " + what)
      ->check(CLI::Range(min, 256))
      ->capture_default_str();
}

void KubeFlags::add(CLI::App& sub) {
  sub.add_option("--kube-api", api,
                 "the Kubernetes API server (http(s)://HOST[:PORT]); default in a pod: the "
                 "in-cluster one, with the pod's service account");
  sub.add_option("--kube-token-file", token_file,
                 "bearer token for --kube-api (re-read at every request)");
  sub.add_option("--kube-ca-file", ca_file, "CA bundle of an https --kube-api");
}

Result<serve::KubeClient> KubeFlags::client() const {
  serve::KubeConfig config;
  if (api.empty()) {
    if (!token_file.empty() || !ca_file.empty()) {
      return Error("--kube-token-file and --kube-ca-file need --kube-api",
                   Error::Kind::kInvalidInput);
    }
    auto in_cluster = serve::in_cluster_config();
    if (!in_cluster) return in_cluster.error();
    config = *in_cluster;
  } else {
    config.url = api;
    config.token_file = token_file;
    config.ca_file = ca_file;
  }
  return serve::KubeClient::create(std::move(config));
}

Status start_server(serve::HttpServer& server, const std::string& port_file) {
  if (auto ok = server.start(); !ok) return ok.error();
  if (!port_file.empty()) {
    if (auto w = write_file_atomic(port_file, std::to_string(server.port()) + "\n"); !w) {
      return w.error();
    }
  }
  return {};
}

}  // namespace corun::cli
