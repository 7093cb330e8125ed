#include "corun/mapping/llm_agent.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <utility>

#include "corun/core/strings.h"

namespace corun::mapping {

namespace {

constexpr std::string_view kSystemPrompt =
    "You place the tool calls of an AI agent's DAG on one GPU and the host CPU. Placements: "
    "gpu_now (starts on the GPU as soon as its inputs are ready; the whole run FAILS if VRAM "
    "is short at that moment), gpu_queue (waits in a FIFO until its VRAM is free), cpu (runs "
    "on host cores, uses no VRAM). GPU tools running at the same time slow each other down; "
    "CPU tools share the cores. Goal: the smallest end-to-end makespan with no failure.\n"
    "You see only the monitor's observation: each tool's options and standalone profile "
    "(cpu_ms, gpu_ms with PCIe copies, vram_gb), measured mappings, per-tool running averages "
    "by context (alone, k=N GPU co-runners, vram_pressure), paired probe results against the "
    "current mapping (mean_delta_ms < 0: the probed variant was faster under the same "
    "conditions), and hints on what is unmeasured, stale or noisy.\n"
    "Each turn, call the function act exactly once. Set `mapping` (every tool id) to run a new "
    "mapping, which becomes the current one; list `probes` to measure variants of the current "
    "mapping (move: `tool` to placement `to`; swap: exchange the placements of `tool` and "
    "`with`; pair: move `tool` to `to` and `with` to `with_to` together). "
    "Measurements cost time: probe what the hints call unmeasured, stale or noisy, not what is "
    "already known. When no probe shows a real improvement, answer done=true with the final "
    "mapping.";

const std::vector<std::string>& kinds() {
  static const std::vector<std::string> k = {"move", "swap", "pair"};
  return k;
}

std::string why_not_allowed(const NodeView& n, const Observation& o) {
  if (!n.gpu_ms) return "it has no GPU implementation";
  return "it needs " + format_number(n.vram_gb) + " GB of VRAM, above the budget of " +
         format_number(o.vram_budget_gb) + " GB";
}

Result<std::size_t> node_of(const nlohmann::json& v, const Observation& o, const char* what) {
  if (!v.is_string()) return Error(std::string(what) + " must be a tool id string");
  const auto id = v.get<std::string>();
  const auto i = o.find(id);
  if (!i) {
    std::vector<std::string> ids;
    for (const auto& n : o.nodes) ids.push_back(n.id);
    return Error("unknown tool '" + id + "'" + did_you_mean(id, ids));
  }
  return *i;
}

Result<Placement> placement_of(const nlohmann::json& v, const NodeView& n, const Observation& o) {
  if (!v.is_string()) return Error("placement of '" + n.id + "' must be a string");
  const auto s = v.get<std::string>();
  const auto p = parse_placement(s);
  if (!p) {
    return Error("'" + s + "' is not a placement (gpu_now, gpu_queue or cpu)" +
                 did_you_mean(s, placement_names()));
  }
  if (std::find(n.options.begin(), n.options.end(), *p) == n.options.end()) {
    return Error("tool '" + n.id + "' cannot run on " + s + ": " + why_not_allowed(n, o));
  }
  return *p;
}

// A checked action from the arguments of an `act` call.
Result<AgentAction> action_from_args(const nlohmann::json& args, const Observation& o) {
  if (!args.is_object()) return Error("the arguments of act must be a JSON object");
  AgentAction a;
  if (args.contains("mapping") && !args["mapping"].is_null()) {
    const auto& m = args["mapping"];
    if (!m.is_object()) return Error("mapping must be an object {tool id: placement}");
    Mapping mapping(o.nodes.size(), Placement::kCpu);
    std::vector<bool> seen(o.nodes.size(), false);
    for (const auto& [id, value] : m.items()) {
      auto i = node_of(nlohmann::json(id), o, "a mapping key");
      if (!i) return i.error().wrap("mapping");
      auto p = placement_of(value, o.nodes[*i], o);
      if (!p) return p.error().wrap("mapping");
      mapping[*i] = *p;
      seen[*i] = true;
    }
    std::vector<std::string> missing;
    for (std::size_t i = 0; i < seen.size(); ++i) {
      if (!seen[i]) missing.push_back(o.nodes[i].id);
    }
    if (!missing.empty()) {
      return Error("mapping must place every tool; missing: " + join(missing, ", "));
    }
    a.mapping = std::move(mapping);
  }
  if (args.contains("probes") && !args["probes"].is_null()) {
    const auto& ps = args["probes"];
    if (!ps.is_array()) return Error("probes must be a list");
    for (const auto& pj : ps) {
      if (!pj.is_object()) return Error("each probe must be an object");
      const std::string kind = pj.value("kind", std::string("move"));
      if (std::find(kinds().begin(), kinds().end(), kind) == kinds().end()) {
        return Error("probe kind '" + kind + "' is not move, swap or pair" +
                     did_you_mean(kind, kinds()));
      }
      auto i = node_of(pj.value("tool", nlohmann::json()), o, "probe.tool");
      if (!i) return i.error().wrap("probe");
      ProbeRequest p;
      if (kind == "swap") {
        auto other = node_of(pj.value("with", nlohmann::json()), o, "probe.with");
        if (!other) return other.error().wrap("probe");
        p = ProbeRequest::swap(*i, *other);
      } else {
        auto to = placement_of(pj.value("to", nlohmann::json()), o.nodes[*i], o);
        if (!to) return to.error().wrap("probe");
        p = ProbeRequest::move(*i, *to);
        if (kind == "pair") {
          auto other = node_of(pj.value("with", nlohmann::json()), o, "probe.with");
          if (!other) return other.error().wrap("probe");
          auto other_to = placement_of(pj.value("with_to", nlohmann::json()), o.nodes[*other], o);
          if (!other_to) return other_to.error().wrap("probe");
          p = ProbeRequest::pair(*i, *to, *other, *other_to);
        }
      }
      // Probes are relative to the mapping that will be current when they run.
      Observation after = o;
      if (a.mapping) after.current = a.mapping;
      if (after.current && !after.apply(p)) {
        return Error("probe '" + describe(p, o) +
                     "' does not change the current mapping or "
                     "breaks a tool's options");
      }
      a.probes.push_back(p);
    }
  }
  if (args.contains("done")) {
    const auto& d = args["done"];
    if (d.is_boolean()) {
      a.done = d.get<bool>();
    } else if (d.is_string() && (d == "true" || d == "false")) {
      a.done = d == "true";
    } else {
      return Error("done must be true or false");
    }
  }
  if (args.contains("reason") && args["reason"].is_string()) {
    a.reason = "llm: " + args["reason"].get<std::string>();
  } else {
    a.reason = "llm";
  }
  if (!o.current && !a.mapping) return Error("nothing is running yet: the answer needs a mapping");
  if (!a.mapping && a.probes.empty() && !a.done) {
    return Error("the answer neither proposes a mapping, nor asks for probes, nor says done");
  }
  if (!a.probes.empty() && !o.current && !a.mapping) {
    return Error("probes need a current mapping");
  }
  return a;
}

Result<nlohmann::json> parse_json_text(std::string_view text, const char* what) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception&) {
    // Servers that ignore the schema wrap JSON in prose or code fences.
    const std::string obj = first_json_object(text);
    if (obj.empty()) {
      return Error(std::string(what) + " hold no complete JSON object (truncated or prose)");
    }
    try {
      return nlohmann::json::parse(obj);
    } catch (const nlohmann::json::exception& e) {
      return Error(std::string(what) + " are not valid JSON: " + e.what());
    }
  }
}

}  // namespace

Result<LlmConfig> LlmConfig::from_env() {
  LlmConfig c;
  const char* url = std::getenv("CORUN_LLM_URL");
  if (!url || !*url) {
    return Error(
        "the llm agent needs CORUN_LLM_URL (e.g. http://127.0.0.1:8080/v1), "
        "CORUN_LLM_MODEL and, for hosted APIs, CORUN_LLM_API_KEY");
  }
  c.url = url;
  if (const char* m = std::getenv("CORUN_LLM_MODEL")) c.model = m;
  if (const char* k = std::getenv("CORUN_LLM_API_KEY")) c.api_key = k;
  for (auto [name, seconds] : {std::pair{"CORUN_LLM_TIMEOUT_S", &c.timeout_s},
                               std::pair{"CORUN_LLM_BUDGET_S", &c.budget_s}}) {
    const char* t = std::getenv(name);
    if (t == nullptr) continue;
    char* end = nullptr;
    const double v = std::strtod(t, &end);
    if (end == t || *end != '\0' || !(v > 0) || !std::isfinite(v)) {
      return Error(std::string(name) + " must be a positive number of seconds, got '" +
                   std::string(t) + "'");
    }
    *seconds = v;
  }
  if (const char* t = std::getenv("CORUN_LLM_TOOL_CHOICE"); t && *t) {
    const std::vector<std::string> modes = {"named", "required", "auto"};
    if (std::find(modes.begin(), modes.end(), t) == modes.end()) {
      return Error("CORUN_LLM_TOOL_CHOICE must be named, required or auto, got '" + std::string(t) +
                   "'" + did_you_mean(t, modes));
    }
    c.tool_choice = t;
  }
  return c;
}

std::string first_json_object(std::string_view text) {
  const auto start = text.find('{');
  if (start == std::string_view::npos) return "";
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (std::size_t i = start; i < text.size(); ++i) {
    const char ch = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (ch == '\\') {
        escaped = true;
      } else if (ch == '"') {
        in_string = false;
      }
      continue;
    }
    if (ch == '"') {
      in_string = true;
    } else if (ch == '{') {
      ++depth;
    } else if (ch == '}') {
      if (--depth == 0) return std::string(text.substr(start, i - start + 1));
    }
  }
  return "";
}

nlohmann::json act_tool_schema(const Observation& o) {
  nlohmann::json ids = nlohmann::json::array();
  nlohmann::json mapping_props = nlohmann::json::object();
  for (const auto& n : o.nodes) {
    ids.push_back(n.id);
    nlohmann::json opts = nlohmann::json::array();
    for (auto p : n.options) opts.push_back(std::string(to_string(p)));
    mapping_props[n.id] = {{"type", "string"}, {"enum", opts}};
  }
  nlohmann::json placements = nlohmann::json::array({"gpu_now", "gpu_queue", "cpu"});
  nlohmann::json params = {
      {"type", "object"},
      {"properties",
       {{"mapping",
         {{"type", "object"},
          {"description", "placement of every tool id; omit to keep the current mapping"},
          {"properties", mapping_props},
          {"required", ids},
          {"additionalProperties", false}}},
        {"probes",
         {{"type", "array"},
          {"description", "variants of the current mapping to measure"},
          {"items",
           {{"type", "object"},
            {"properties",
             {{"kind", {{"type", "string"}, {"enum", {"move", "swap", "pair"}}}},
              {"tool", {{"type", "string"}, {"enum", ids}}},
              {"to", {{"type", "string"}, {"enum", placements}}},
              {"with", {{"type", "string"}, {"enum", ids}}},
              {"with_to", {{"type", "string"}, {"enum", placements}}}}},
            {"required", {"kind", "tool"}},
            {"additionalProperties", false}}}}},
        {"done", {{"type", "boolean"}, {"description", "true: mapping is final"}}},
        {"reason", {{"type", "string"}, {"description", "one sentence"}}}}},
      {"required", {"done"}},
      {"additionalProperties", false}};
  return {{"type", "function"},
          {"function",
           {{"name", "act"},
            {"description", "Run a mapping, measure probes, or finish with the final mapping."},
            {"parameters", params}}}};
}

nlohmann::json chat_request(const LlmConfig& config, const Observation& o,
                            const nlohmann::json& extra_messages) {
  nlohmann::json messages = nlohmann::json::array();
  messages.push_back({{"role", "system"}, {"content", std::string(kSystemPrompt)}});
  messages.push_back({{"role", "user"}, {"content", "Observation:\n" + to_json(o).dump()}});
  for (const auto& m : extra_messages) messages.push_back(m);
  nlohmann::json body = {{"messages", messages},
                         {"tools", nlohmann::json::array({act_tool_schema(o)})},
                         {"temperature", config.temperature},
                         {"max_tokens", config.max_tokens},
                         {"stream", false}};
  if (config.tool_choice == "named") {
    body["tool_choice"] = {{"type", "function"}, {"function", {{"name", "act"}}}};
  } else {
    body["tool_choice"] = config.tool_choice;
  }
  if (!config.model.empty()) body["model"] = config.model;
  return body;
}

Result<AgentAction> parse_chat_response(std::string_view body, const Observation& o) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(body);
  } catch (const nlohmann::json::exception&) {
    return Error("the response is not JSON: '" + std::string(body.substr(0, 120)) + "'");
  }
  if (!j.is_object()) return Error("the response is not a JSON object");
  if (j.contains("error")) return Error("the server returned an error: " + j["error"].dump());
  if (!j.contains("choices") || !j["choices"].is_array() || j["choices"].empty()) {
    return Error("the response has no choices");
  }
  const auto& choice = j["choices"][0];
  if (!choice.is_object()) return Error("choices[0] is not an object");
  const std::string finish = choice.contains("finish_reason") && choice["finish_reason"].is_string()
                                 ? choice["finish_reason"].get<std::string>()
                                 : "";
  if (finish == "length") {
    return Error("the answer was truncated (finish_reason=length): answer with less text");
  }
  if (!choice.contains("message") || !choice["message"].is_object()) {
    return Error("choices[0] has no message");
  }
  const auto& msg = choice["message"];
  nlohmann::json args;
  if (msg.contains("tool_calls") && msg["tool_calls"].is_array() && !msg["tool_calls"].empty()) {
    const auto& call = msg["tool_calls"][0];
    if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) {
      return Error("tool_calls[0] has no function");
    }
    const auto& fn = call["function"];
    const std::string name = fn.value("name", std::string());
    if (name != "act") return Error("called unknown function '" + name + "': call act");
    const nlohmann::json raw = fn.value("arguments", nlohmann::json());
    if (raw.is_string()) {
      auto parsed = parse_json_text(raw.get<std::string>(), "the function arguments");
      if (!parsed) return parsed.error();
      args = std::move(*parsed);
    } else if (raw.is_object()) {
      args = raw;  // some servers send the arguments as an object
    } else {
      return Error("the function call has no arguments");
    }
  } else if (msg.contains("content") && msg["content"].is_string()) {
    auto parsed = parse_json_text(msg["content"].get<std::string>(), "the message content");
    if (!parsed) return parsed.error().wrap("no function call");
    args = std::move(*parsed);
    // {"name": "act", "arguments": {...}} written out as text.
    if (args.is_object() && args.contains("arguments")) {
      nlohmann::json inner = args["arguments"];
      if (inner.is_string()) {
        auto p = parse_json_text(inner.get<std::string>(), "the function arguments");
        if (!p) return p.error();
        inner = std::move(*p);
      }
      args = std::move(inner);
    }
  } else {
    return Error("the answer has neither a function call nor content");
  }
  return action_from_args(args, o);
}

LlmAgent::LlmAgent(LlmConfig config, std::shared_ptr<Agent> fallback)
    : config_(std::move(config)), fallback_(std::move(fallback)) {
  if (!fallback_) fallback_ = std::make_shared<BuiltinAgent>();
  std::string url = config_.url;
  const auto scheme_end = url.find("://");
  const auto host_start = scheme_end == std::string::npos ? 0 : scheme_end + 3;
  const auto slash = url.find('/', host_start);
  scheme_host_port_ = url.substr(0, slash);
  path_ = slash == std::string::npos ? "" : url.substr(slash);
  while (!path_.empty() && path_.back() == '/') path_.pop_back();
  const std::string suffix = "/chat/completions";
  if (path_.size() < suffix.size() ||
      path_.compare(path_.size() - suffix.size(), suffix.size(), suffix) != 0) {
    path_ += suffix;
  }
}

Result<std::string> LlmAgent::post(const nlohmann::json& body,
                                   std::chrono::steady_clock::time_point deadline) {
  using Clock = std::chrono::steady_clock;
  ++requests_;
  if (scheme_host_port_.find("://") == std::string::npos) {
    return Error("CORUN_LLM_URL '" + config_.url + "' needs a scheme (http:// or https://)");
  }
  const std::string budget_spent =
      "no complete answer within the time budget of " + format_number(config_.budget_s) + " s";
  const auto left = deadline - Clock::now();
  if (left <= Clock::duration::zero()) return Error(budget_spent);
  httplib::Client client(scheme_host_port_);
  if (!client.is_valid()) return Error("cannot use URL '" + config_.url + "'");
  // No single wait may outlast what is left of the budget. Rounded up to the next millisecond
  // and one more: the client waits in whole milliseconds (truncated), and a wait that ended a
  // hair before the deadline would read as a transport failure worth another attempt, where
  // the budget was what ran out (the watchdog below ends the request at the deadline itself).
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::ceil<std::chrono::milliseconds>(
          std::min<Clock::duration>(left, std::chrono::duration_cast<Clock::duration>(
                                              std::chrono::duration<double>(config_.timeout_s)))) +
      std::chrono::milliseconds(1));
  client.set_connection_timeout(us);
  client.set_read_timeout(us);
  client.set_write_timeout(us);

  httplib::Request req;
  req.method = "POST";
  req.path = path_;
  if (!config_.api_key.empty()) req.set_header("Authorization", "Bearer " + config_.api_key);
  req.set_header("Content-Type", "application/json");
  req.body = body.dump();
  // The body arrives here piece by piece, so that a body that never ends or grows past the
  // limit is abandoned as it comes, not after it was all read.
  std::string answer;
  bool too_large = false;
  bool too_late = false;
  req.content_receiver = [&](const char* data, std::size_t n, std::uint64_t, std::uint64_t) {
    if (answer.size() + n > config_.max_response_bytes) {
      too_large = true;
      return false;
    }
    answer.append(data, n);
    too_late = Clock::now() >= deadline;
    return !too_late;
  };
  // A server that trickles its headers never reaches the receiver; a watchdog shuts the
  // socket down at the deadline whatever the request is waiting for.
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::thread watchdog([&] {
    std::unique_lock lock(mu);
    if (!cv.wait_until(lock, deadline, [&] { return done; })) client.stop();
  });
  httplib::Response res;
  httplib::Error error = httplib::Error::Success;
  const bool sent = client.send(req, res, error);
  {
    std::lock_guard lock(mu);
    done = true;
  }
  cv.notify_one();
  watchdog.join();

  const std::string where = scheme_host_port_ + path_;
  if (too_large) {
    return Error("the response from " + where + " exceeds " +
                 std::to_string(config_.max_response_bytes) + " bytes; abandoned");
  }
  if (too_late || (!sent && Clock::now() >= deadline)) return Error(budget_spent);
  if (!sent) {
    std::string why = httplib::to_string(error);
    if (error == httplib::Error::Read) {
      why += " (the server closed the connection or stopped sending before the whole response)";
    }
    return Error("request to " + where + " failed: " + why);
  }
  if (res.status != 200) {
    return Error("HTTP " + std::to_string(res.status) + " from " + where + ": " +
                 answer.substr(0, 200));
  }
  return answer;
}

Result<AgentAction> LlmAgent::act(const Observation& o) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(config_.budget_s));
  nlohmann::json extra = nlohmann::json::array();
  std::vector<std::string> log;
  std::string last_error;
  const int attempts = std::max(1, config_.max_attempts);
  int made = 0;
  for (int attempt = 1; attempt <= attempts; ++attempt) {
    if (attempt > 1 && std::chrono::steady_clock::now() >= deadline) break;
    ++made;
    auto body = post(chat_request(config_, o, extra), deadline);
    if (!body) {
      last_error = body.error().what();
      log.push_back("llm attempt " + std::to_string(attempt) + "/" + std::to_string(attempts) +
                    ": " + last_error);
      continue;  // transport problems: same question again
    }
    auto action = parse_chat_response(*body, o);
    if (action) {
      action->log.insert(action->log.begin(), log.begin(), log.end());
      return action;
    }
    last_error = action.error().what();
    log.push_back("llm attempt " + std::to_string(attempt) + "/" + std::to_string(attempts) + ": " +
                  last_error);
    // Tell the model what was wrong; a plain user turn works on every server (no tool-result
    // bookkeeping needed).
    extra.push_back({{"role", "user"},
                     {"content", "Your previous answer was rejected: " + last_error +
                                     ". Call act again with a corrected answer."}});
  }
  ++fallbacks_;
  auto a = fallback_->act(o);
  if (!a) return a;
  a->log.insert(a->log.begin(), log.begin(), log.end());
  a->log.push_back("llm: falling back to the " + std::string(fallback_->name()) + " agent after " +
                   std::to_string(made) + " failed attempt" + (made == 1 ? "" : "s") +
                   " (last: " + last_error + ")");
  a->reason = "fallback (" + std::string(fallback_->name()) + "): " + a->reason;
  return a;
}

const std::vector<std::string>& agent_names() {
  static const std::vector<std::string> names = {"builtin", "llm"};
  return names;
}

Result<std::shared_ptr<Agent>> make_agent(std::string_view kind,
                                          const std::optional<LlmConfig>& llm) {
  if (kind == "builtin") return std::shared_ptr<Agent>(std::make_shared<BuiltinAgent>());
  if (kind == "llm") {
    if (!llm) return Error("the llm agent needs a configuration (CORUN_LLM_URL, ...)");
    return std::shared_ptr<Agent>(std::make_shared<LlmAgent>(*llm));
  }
  return Error("unknown agent '" + std::string(kind) + "' (builtin or llm)" +
               did_you_mean(kind, agent_names()));
}

}  // namespace corun::mapping
