#include "corun/mapping/scenario.h"

#include <algorithm>
#include <sstream>

#include "corun/core/atomic_file.h"
#include "corun/core/enum_names.h"
#include "corun/core/strings.h"
#include "corun/core/yaml.h"

namespace corun::mapping {

namespace {

constexpr EnumNames<Placement, 3> kPlacementNames{{{{Placement::kGpuNow, "gpu_now"},
                                                   {Placement::kGpuQueue, "gpu_queue"},
                                                   {Placement::kCpu, "cpu"}}}};
static_assert(kPlacementNames.table.size() == kPlacementCount);

}  // namespace

std::string_view to_string(Placement p) { return kPlacementNames.name(p); }

const std::vector<std::string>& placement_names() {
  static const std::vector<std::string> names = kPlacementNames.names();
  return names;
}

std::optional<Placement> parse_placement(std::string_view s) { return kPlacementNames.parse(s); }

std::optional<std::size_t> Scenario::find(std::string_view id) const {
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].id == id) return i;
  }
  return std::nullopt;
}

namespace {

const std::vector<std::string>& kinds() {
  static const std::vector<std::string> k = {"serial", "contention", "memory", "random"};
  return k;
}

bool valid_id(const std::string& id) {
  return !id.empty() && std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  });
}

// Reports a cycle (naming one node on it) when Kahn's algorithm cannot order every node.
void check_acyclic(const Scenario& s, const YamlField& tools_field) {
  const std::size_t n = s.nodes.size();
  std::vector<int> indegree(n, 0);
  std::vector<std::vector<std::size_t>> succ(n);
  for (std::size_t i = 0; i < n; ++i) {
    for (auto p : s.nodes[i].after) {
      succ[p].push_back(i);
      ++indegree[i];
    }
  }
  std::vector<std::size_t> ready;
  for (std::size_t i = 0; i < n; ++i) {
    if (indegree[i] == 0) ready.push_back(i);
  }
  std::size_t ordered = 0;
  while (!ready.empty()) {
    const auto i = ready.back();
    ready.pop_back();
    ++ordered;
    for (auto j : succ[i]) {
      if (--indegree[j] == 0) ready.push_back(j);
    }
  }
  if (ordered == n) return;
  for (std::size_t i = 0; i < n; ++i) {
    if (indegree[i] > 0) {
      tools_field.at(i)["after"].error("the DAG has a cycle through '" + s.nodes[i].id + "'");
      return;
    }
  }
}

}  // namespace

Result<Scenario> parse_scenario(std::string_view text, const std::string& file,
                                const ToolCatalog& tools) {
  auto root = parse_yaml(text, file);
  if (!root) return root.error();
  Diagnostics diags;
  auto s = parse_scenario_node(*root, file, tools, diags);
  if (!s) return diags.to_error();
  return std::move(*s);
}

std::optional<Scenario> parse_scenario_node(const YAML::Node& root, const std::string& file,
                                            const ToolCatalog& tools, Diagnostics& diags) {
  const YamlField top(root, file, "", &diags);
  if (!top.expect_map()) return std::nullopt;
  top.check_keys({"name", "kind", "description", "device", "vram_budget_gb", "seed", "noise",
                  "background", "co_running", "tools"});
  Scenario s;
  s.file = file;
  s.name = top.string_at("name", true).value_or("");
  s.description = top.string_at("description", false).value_or("");
  if (const auto k = top.string_at("kind", true)) {
    if (std::find(kinds().begin(), kinds().end(), *k) == kinds().end()) {
      top["kind"].error("unknown kind '" + *k + "' (serial, contention, memory or random)" +
                        did_you_mean(*k, kinds()));
    } else {
      s.kind = *k;
    }
  }
  s.device = top.string_at("device", false).value_or("rtx3090");
  s.vram_budget_gb = top.number_at("vram_budget_gb", 0.001, 1e5, true).value_or(0);
  s.context.seed =
      static_cast<std::uint64_t>(top.integer_at("seed", 0, 1LL << 53, false).value_or(1));
  s.noise = top.number_at("noise", 0, 0.5, false).value_or(tools.model.default_noise);
  if (const YamlField b = top["background"]; b.present() && b.expect_map()) {
    b.check_keys({"gpu_sm_util", "gpu_bw_util", "cpu_busy_cores"});
    s.background.gpu_sm_util = b.number_at("gpu_sm_util", 0, 1, false).value_or(0);
    s.background.gpu_bw_util = b.number_at("gpu_bw_util", 0, 1, false).value_or(0);
    s.background.cpu_busy_cores = b.number_at("cpu_busy_cores", 0, 4096, false).value_or(0);
  }
  if (const YamlField c = top["co_running"]; c.present() && c.expect_map()) {
    c.check_keys({"plan", "workload"});
    s.co_running.plan = c.string_at("plan", true).value_or("");
    s.co_running.workload = c.string_at("workload", false).value_or("");
  }
  const YamlField list = top["tools"];
  if (!list.present()) {
    list.error("missing required field");
    return std::nullopt;
  }
  if (!list.expect_sequence()) return std::nullopt;
  const auto tool_names = tools.names();
  // First pass: ids and tools, so that `after` may name a node declared later.
  for (std::size_t i = 0; i < list.size(); ++i) {
    const YamlField f = list.at(i);
    ToolNode node;
    node.line = f.line();
    if (f.expect_map()) {
      f.check_keys({"id", "tool", "after"});
      node.id = f.string_at("id", true).value_or("");
      if (!node.id.empty() && !valid_id(node.id)) {
        f["id"].error("ids use letters, digits, '_' and '-' only");
      }
      if (!node.id.empty() && s.find(node.id)) {
        f["id"].error("duplicate id '" + node.id + "'");
      }
      if (const auto t = f.string_at("tool", true)) {
        if (!tools.find(*t)) {
          f["tool"].error("unknown tool '" + *t + "'" + did_you_mean(*t, tool_names));
        }
        node.tool = *t;
      }
    }
    s.nodes.push_back(std::move(node));
  }
  std::vector<std::string> ids;
  for (const auto& n : s.nodes) ids.push_back(n.id);
  for (std::size_t i = 0; i < list.size(); ++i) {
    const YamlField a = list.at(i)["after"];
    if (!a.present()) continue;
    if (!a.expect_sequence(true)) continue;
    for (std::size_t k = 0; k < a.size(); ++k) {
      const auto dep = a.at(k).string();
      if (!dep) continue;
      const auto j = s.find(*dep);
      if (!j) {
        a.at(k).error("unknown tool id '" + *dep + "'" + did_you_mean(*dep, ids));
      } else if (*j == i) {
        a.at(k).error("a tool cannot depend on itself");
      } else if (std::find(s.nodes[i].after.begin(), s.nodes[i].after.end(), *j) !=
                 s.nodes[i].after.end()) {
        a.at(k).error("duplicate dependency '" + *dep + "'");
      } else {
        s.nodes[i].after.push_back(*j);
      }
    }
  }
  if (diags.empty()) check_acyclic(s, list);
  if (!diags.empty()) return std::nullopt;
  return s;
}

Result<Scenario> load_scenario(const std::filesystem::path& path, const ToolCatalog& tools) {
  auto text = read_file(path);
  if (!text) return text.error();
  return parse_scenario(*text, path.string(), tools);
}

Result<std::vector<Scenario>> load_scenario_dir(const std::filesystem::path& dir,
                                                const ToolCatalog& tools) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return Error(dir.string() + ": not a directory", Error::Kind::kNotFound);
  }
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.is_regular_file() && e.path().extension() == ".yaml") files.push_back(e.path());
  }
  if (ec) return Error(dir.string() + ": " + ec.message(), Error::Kind::kIo);
  std::sort(files.begin(), files.end());
  if (files.empty()) return Error(dir.string() + ": no *.yaml scenarios", Error::Kind::kNotFound);
  std::vector<Scenario> out;
  for (const auto& f : files) {
    auto s = load_scenario(f, tools);
    if (!s) return s.error();
    out.push_back(std::move(*s));
  }
  return out;
}

std::string to_yaml(const Scenario& s) {
  std::ostringstream o;
  o << "name: " << s.name << "\n";
  o << "kind: " << s.kind << "\n";
  if (!s.description.empty()) {
    std::string quoted;
    for (char c : s.description) {
      if (c == '"' || c == '\\') quoted += '\\';
      quoted += c == '\n' ? ' ' : c;
    }
    o << "description: \"" << quoted << "\"\n";
  }
  o << "device: " << s.device << "\n";
  o << "vram_budget_gb: " << format_number(s.vram_budget_gb) << "\n";
  o << "seed: " << s.context.seed << "\n";
  o << "noise: " << format_number(s.noise) << "\n";
  const Background& b = s.background;
  if (b.gpu_sm_util > 0 || b.gpu_bw_util > 0 || b.cpu_busy_cores > 0) {
    o << "background: {gpu_sm_util: " << format_number(b.gpu_sm_util)
      << ", gpu_bw_util: " << format_number(b.gpu_bw_util)
      << ", cpu_busy_cores: " << format_number(b.cpu_busy_cores) << "}\n";
  }
  if (!s.co_running.plan.empty()) {
    o << "co_running: {plan: \"" << s.co_running.plan << "\"";
    if (!s.co_running.workload.empty()) o << ", workload: \"" << s.co_running.workload << "\"";
    o << "}\n";
  }
  o << "tools:\n";
  for (const auto& n : s.nodes) {
    o << "  - {id: " << n.id << ", tool: " << n.tool;
    if (!n.after.empty()) {
      o << ", after: [";
      for (std::size_t k = 0; k < n.after.size(); ++k) {
        o << (k ? ", " : "") << s.nodes[n.after[k]].id;
      }
      o << "]";
    }
    o << "}\n";
  }
  return o.str();
}

}  // namespace corun::mapping
