#pragma once

// The export layer turns a corun plan into the configuration of a real serving stack: vLLM
// launch arguments, Triton model configurations, MPS client limits, and a docker compose file
// that starts them together. (The namespace is `exporting` because `export` is a C++ keyword.)

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "corun/catalog/catalog.h"
#include "corun/core/result.h"
#include "corun/export/deployment.h"
#include "corun/export/plan_input.h"
#include "corun/space/transition.h"

namespace corun::exporting {

/// @brief The configuration formats `corun export` writes.
enum class ExportFormat {
  kVllm,     ///< vllm.sh: one `vllm serve` command per LLM
  kTriton,   ///< NAME/config.pbtxt per vision, encoder and speech model (a model repository)
  kMps,      ///< NAME.env per model: MPS client limits (env-file syntax)
  kCompose,  ///< docker-compose.yaml (+ the Triton repository it mounts)
  kK8s,      ///< kubernetes.yaml: a DRA claim of the GPU, Deployments and Services (+ triton/)
};

/// @brief The pod annotation that carries a pod's corun model entry (a workload `models` entry
/// as a JSON string, the body `POST /v1/whatif` and `POST /v1/models` take): what the
/// extender and `corun serve --kube-node` read, and what `--format k8s` writes.
inline constexpr const char* kModelAnnotation = "corun.io/model";

/// @brief All formats, in declaration order.
const std::vector<ExportFormat>& export_formats();
/// @brief "vllm", "triton", "mps", "compose".
std::string_view to_string(ExportFormat f);
/// @brief The format called `name`, or nullopt.
std::optional<ExportFormat> parse_export_format(std::string_view name);
/// @brief The format names, for help texts and suggestions.
const std::vector<std::string>& export_format_names();

/// @brief One file of an export, its path relative to the output directory.
struct ExportFile {
  std::string path;
  std::string content;
};

/// @brief Renders a plan in one format. Pure: nothing is written.
/// @param plan a plan resolved against its workload
/// @param format the target format
/// @param options provenance, ports and device
/// @return the files of the export, or an Error (kInvalidInput) when the plan cannot be
/// expressed in the format: no model the format serves, or a precision without a catalogued
/// checkpoint (vLLM loads LLMs by their Hugging Face id)
Result<std::vector<ExportFile>> render_export(const PlanInput& plan, ExportFormat format,
                                              const ExportOptions& options);

/// @brief What changes from plan `from` to plan `to` (both of one workload: `to`'s), in one
/// format: the format's files of the models that start or change only (compose: the whole file,
/// since `docker compose up -d` recreates only the services whose definition changed; nothing
/// when no model changes), and `transition.json`: the joint transition (space/transition.h:
/// each model's action, order, downtime, make-before-break or break, the VRAM peak) with, per
/// step, how its stack applies it: vLLM's argv before and after, Triton's load (or unload)
/// request with the new ModelConfig as JSON, the MPS environment before and after when it
/// changes. Pure: nothing is written.
/// @return the files, transition.json last; an Error of kind kInvalidInput naming the plan file
/// and field when the plans are of different workloads or a format cannot express them
Result<std::vector<ExportFile>> render_export_diff(const PlanInput& from, const PlanInput& to,
                                                   ExportFormat format,
                                                   const ExportOptions& options,
                                                   const ActuationTable& table);

/// @brief The request of one `corun export` call.
struct ExportRequest {
  std::string plan_file;      ///< the plan to export (with from_file: the plan to go to)
  std::string from_file;      ///< the plan in force: export only what changes from it
  std::string format;         ///< a name from export_format_names()
  std::string workload_file;  ///< empty: the one the plan names
  std::string out_dir;        ///< empty: print to stdout
};

/// @brief `corun export`: reads the plan, resolves it against its workload, renders the
/// format and, with an output directory, writes every file atomically (core/atomic_file.h).
/// All validation and rendering happen before the first write, so bad input leaves nothing
/// behind.
/// @param request the flags
/// @param catalog catalog for the workload
/// @param options provenance, ports and device
/// @param warnings when not null, receives what of the (new) plan does not deploy as planned,
/// one sentence each, as the files' `# WARNING:` lines say it (a KV cache at --max-model-len
/// the GPU cannot hold, MPS limits above the GPU's memory)
/// @return what to print on stdout: the files' contents (each preceded by a `# ==> PATH <==`
/// line when there are several), or with out_dir the list of files written; an Error of kind
/// kInvalidInput for bad input, kNotFound for unreadable files, kIo when a write fails
Result<std::string> run_export(const ExportRequest& request, const Catalog& catalog,
                               const ExportOptions& options,
                               std::vector<std::string>* warnings = nullptr);

}  // namespace corun::exporting
