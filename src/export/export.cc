// corun export: format names, dispatch to the renderers, and the one call the CLI makes.

#include "corun/export/export.h"

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <utility>

#include "corun/core/atomic_file.h"
#include "corun/core/enum_names.h"
#include "corun/core/strings.h"
#include "render.h"

namespace corun::exporting {

namespace {

constexpr EnumNames<ExportFormat, 5> kFormatNames{{{{ExportFormat::kVllm, "vllm"},
                                                   {ExportFormat::kTriton, "triton"},
                                                   {ExportFormat::kMps, "mps"},
                                                   {ExportFormat::kCompose, "compose"},
                                                   {ExportFormat::kK8s, "k8s"}}}};

}  // namespace

const std::vector<ExportFormat>& export_formats() {
  static const std::vector<ExportFormat> formats = [] {
    const auto values = kFormatNames.values();
    return std::vector<ExportFormat>(values.begin(), values.end());
  }();
  return formats;
}

std::string_view to_string(ExportFormat f) { return kFormatNames.name(f); }

std::optional<ExportFormat> parse_export_format(std::string_view name) {
  return kFormatNames.parse(name);
}

const std::vector<std::string>& export_format_names() {
  static const std::vector<std::string> names = kFormatNames.names();
  return names;
}

std::string fixed_decimals(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string model_line(const ModelDeployment& d) {
  return d.spec->name + ": " + d.spec->arch.name + ", " +
         (d.settings_text.empty() ? std::string("no searched knob") : d.settings_text);
}

std::string file_header(const PlanInput& plan, const ExportOptions& options,
                        const std::string& what) {
  const Device& dev = plan.workload.device;
  return "# " + what + "\n# Plan: " + plan.label + " (" + plan.plan_file +
         ").\n# Workload: " + plan.workload.file + " on " + dev.name + " (" + dev.display_name +
         ", " + fixed_decimals(dev.vram_gb, 2) + " GB).\n# Written by `corun export`, " +
         options.generator + ".\n";
}

Result<std::vector<ExportFile>> render_export(const PlanInput& plan, ExportFormat format,
                                              const ExportOptions& options) {
  const auto models = plan_deployment(plan, options);
  switch (format) {
    case ExportFormat::kVllm:
      return render_vllm(plan, models, options);
    case ExportFormat::kTriton:
      return render_triton(plan, models, options);
    case ExportFormat::kMps:
      return render_mps(plan, models, options);
    case ExportFormat::kCompose:
      return render_compose(plan, models, options);
    case ExportFormat::kK8s:
      return render_k8s(plan, models, options);
  }
  return Error("unknown export format", Error::Kind::kInternal);
}

Result<std::string> run_export(const ExportRequest& request, const Catalog& catalog,
                               const ExportOptions& options, std::vector<std::string>* warnings) {
  const auto format = parse_export_format(request.format);
  if (!format) {
    return Error("--format: unknown format '" + request.format + "'" +
                 did_you_mean(request.format, export_format_names()) +
                 "; known: " + join(export_format_names(), ", "));
  }
  auto plan = load_plan_input(request.plan_file, request.workload_file, catalog);
  if (!plan) return plan.error();
  Result<std::vector<ExportFile>> files = Error("unreachable", Error::Kind::kInternal);
  if (request.from_file.empty()) {
    files = render_export(*plan, *format, options);
    if (!files) return files.error().wrap(request.plan_file);
  } else {
    // The plan in force, read against the same workload (a served plan names none).
    auto from = load_plan_input(
        request.from_file,
        request.workload_file.empty() ? plan->workload.file : request.workload_file, catalog);
    if (!from) return from.error();
    auto table = ActuationTable::from_catalog(catalog);
    if (!table) return table.error();
    files = render_export_diff(*from, *plan, *format, options, *table);
    if (!files) return files.error();
  }

  if (warnings != nullptr) {
    const auto models = plan_deployment(*plan, options);
    for (const auto& d : models) {
      for (const auto& w : d.warnings) warnings->push_back(d.spec->name + ": " + w);
    }
    if (std::string w = mps_overcommit_warning(*plan, models); !w.empty()) {
      warnings->push_back(std::move(w));
    }
  }
  if (request.out_dir.empty()) {
    if (files->size() == 1) return files->front().content;
    std::string out;
    for (const auto& f : *files) out += "# ==> " + f.path + " <==\n" + f.content + "\n";
    return out;
  }
  // Everything is rendered: from here on only I/O can fail, and each file is replaced whole.
  const std::filesystem::path dir(request.out_dir);
  std::error_code ec;
  if (std::filesystem::exists(dir, ec) && !std::filesystem::is_directory(dir, ec)) {
    return Error("--out: " + dir.string() + " exists and is not a directory");
  }
  std::string written;
  for (const auto& f : *files) {
    const auto path = dir / f.path;
    std::filesystem::create_directories(path.parent_path(), ec);
    if (ec) {
      return Error("--out: cannot create " + path.parent_path().string() + ": " + ec.message(),
                   Error::Kind::kIo);
    }
    if (auto st = write_file_atomic(path, f.content); !st) return st.error();
    written += "wrote " + path.string() + "\n";
  }
  return written;
}

std::string yaml_quoted(const std::string& s) {
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace corun::exporting
