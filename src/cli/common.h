#pragma once

// Helpers shared by the CLI verbs: loading inputs and rendering outputs. No scheduling logic.

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "corun/catalog/catalog.h"
#include "corun/core/context.h"
#include "corun/core/result.h"
#include "corun/serve/kube.h"
#include "corun/serve/server.h"
#include "corun/space/space.h"
#include "corun/spec/workload.h"
#include "corun/testbed/testbed.h"

namespace corun::cli {

/// @brief Help of every verb's --catalog flag.
inline constexpr const char* kCatalogFlagHelp =
    "catalog overlay: a directory whose devices.yaml and models.yaml add or override built-in "
    "entries by name (docs/catalog.md); default: CORUN_CATALOG, else the built-in catalog";

/// @brief The catalog: the built-in one with --catalog DIR laid over it if given, else with
/// CORUN_CATALOG's directory, else the built-in one alone.
Result<const Catalog*> load_catalog(const std::string& dir);

/// @brief The catalog of a verb that reads a plan file (a run's report.json, corun plan
/// --json): --catalog DIR if given, else the overlay the plan records (its `catalog` member),
/// else as load_catalog(""). A recorded overlay that no longer exists is an error (kNotFound,
/// naming the plan, the directory and --catalog); one whose content changed since is used
/// with a warning on stderr.
Result<const Catalog*> load_catalog_for_plan(const std::string& dir, const std::string& plan_file);

/// @brief Loads and validates a workload file against the catalog.
Result<Workload> load_workload_file(const std::string& path, const std::string& catalog_dir);

/// @brief Refuses a workload of several GPUs or MIG slices in a verb that runs one GPU: an
/// error (bad input) naming the file, the node and the verbs that plan a node.
Status require_one_gpu(const Workload& w, std::string_view verb);

/// @brief Refuses a workload that declares a recurring tool burst (`tools:`) in a verb that
/// does not plan for one: an error (bad input) naming the file, the line and what does.
Status require_no_tools(const Workload& w, std::string_view verb);

/// @brief Parses "--config cam0.imgsz=640,chat.precision=awq" into a joint configuration.
/// Models not named start at their first local configuration; `only` (comma list of model
/// names, empty = all) marks the others absent.
Result<JointConfig> parse_config_flag(const Workload& w, const std::string& config,
                                      const std::string& only);

/// @brief The JSON form of a measurement (schema in docs/formats.md).
nlohmann::json to_json(const Measurement& m);

/// @brief A model's SLA in one short cell: "p95<=60 ttft<=800 tpot<=60", or "-".
std::string sla_text(const ModelSpec& m);

/// @brief A plain text table with aligned columns.
class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  [[nodiscard]] std::string render() const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

/// @brief Help text of a --testbed flag: the testbeds this binary knows ("testbed: sim,
/// torch-cpu").
std::string testbed_help();

/// @brief "12.3" with `digits` decimals, or "-" for an absent value.
std::string fixed(double v, int digits = 1);

/// @brief A count in JSON: the integer when exact, else a floating-point number (null beyond
/// a double's range). Written next to a `..._exact` boolean.
nlohmann::json count_json(const ConfigCount& c);

/// @brief A count in text: "78732", or "about 1.646e+63 (not exact)".
std::string count_text(const ConfigCount& c);

/// @brief The flags of a listening command: --host, --port (0 = any free port), --port-file.
void add_listen_flags(CLI::App& sub, std::string& host, int& port, std::string& port_file);

/// @brief Starts `server` and, when `port_file` is not empty, writes the port it listens on
/// there (atomically), so that a script that asked for port 0 can find it.
Status start_server(serve::HttpServer& server, const std::string& port_file);

/// @brief The seed every verb starts from unless --seed says otherwise (Context's).
inline constexpr std::uint64_t kDefaultSeed = Context::kDefaultSeed;

/// @brief Adds --seed, the one declaration every verb shares: its help says what the seed
/// draws (`what`: "the solver and the twin") and that a seed gives one result.
CLI::Option* add_seed_flag(CLI::App& sub, std::uint64_t& seed, const std::string& what);

/// @brief The compute threads (solver, profiling and evaluation workers) of a verb unless
/// --threads says otherwise (Context's).
inline constexpr int kDefaultThreads = Context::kDefaultThreads;
/// @brief The HTTP workers of `corun serve` and `corun extender` unless --threads says otherwise.
inline constexpr int kDefaultHttpThreads = 8;

/// @brief Adds --threads, the one declaration every verb shares: its help says what runs on
/// them (`what`: "the solver"); at least `min` (0 where 0 means every core), at most 256.
CLI::Option* add_threads_flag(CLI::App& sub, int& threads, const std::string& what, int min = 1);

/// @brief How a verb reaches the Kubernetes API: in the cluster (the pod's service account), or
/// `--kube-api URL` with `--kube-token-file` (and `--kube-ca-file` for https) from outside.
struct KubeFlags {
  std::string api, token_file, ca_file;
  /// Adds --kube-api, --kube-token-file and --kube-ca-file.
  void add(CLI::App& sub);
  /// The client: --kube-api's when given, else the in-cluster configuration's.
  [[nodiscard]] Result<serve::KubeClient> client() const;
};

}  // namespace corun::cli
