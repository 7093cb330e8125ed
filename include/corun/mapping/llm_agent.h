#pragma once

// The LLM agent: an OpenAI-compatible chat-completions client (llama.cpp server, vLLM,
// Ollama, hosted APIs). Each act() sends the monitor's observation and forces a call of the
// function `act`, whose JSON schema enumerates the tool ids and placements. Answers are parsed
// robustly (arguments as a string or an object, code fences, prose around the JSON), checked
// (names, enum values, the executor's VRAM and GPU rules), and on any problem re-asked with
// the error message; after max_attempts the deterministic fallback agent answers and the
// reason is logged. Setup per server: docs/placement.md.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "corun/core/result.h"
#include "corun/mapping/agent.h"

namespace corun::mapping {

/// @brief Where and how to reach the model.
struct LlmConfig {
  std::string url;         ///< base URL, e.g. http://127.0.0.1:8080/v1 (".../chat/completions" ok)
  std::string model;       ///< model name the server expects (may be empty for llama.cpp)
  std::string api_key;     ///< sent as "Authorization: Bearer ..." when not empty
  double timeout_s = 120;  ///< connect / read / write timeout of one request
  /// Time budget of one act(), every attempt included: a request still running when it is
  /// spent (a server that stalls, or streams a body that never ends) is abandoned, no new one
  /// starts, and the fallback answers.
  double budget_s = 360;
  /// A response body beyond this many bytes is abandoned (a chat completion is a few KiB).
  std::size_t max_response_bytes = std::size_t{4} << 20;
  /// How the call of `act` is forced: "named" ({"type": "function", "function": {"name":
  /// "act"}}, OpenAI and vLLM), "required" (llama.cpp, which accepts only strings; with one
  /// tool it forces the same call) or "auto" (servers that support neither).
  std::string tool_choice = "named";
  int max_attempts = 3;  ///< requests per act() before falling back (first try + retries)
  int max_tokens = 1024;
  double temperature = 0;

  /// @brief From CORUN_LLM_URL (required), CORUN_LLM_MODEL, CORUN_LLM_API_KEY,
  /// CORUN_LLM_TIMEOUT_S, CORUN_LLM_BUDGET_S and CORUN_LLM_TOOL_CHOICE. Read once at the CLI
  /// boundary; the library never reads the environment itself.
  static Result<LlmConfig> from_env();
};

/// @brief The schema of the forced `act` function for an observation.
nlohmann::json act_tool_schema(const Observation& observation);

/// @brief The request body for one chat completion (system + observation + retry notes).
nlohmann::json chat_request(const LlmConfig& config, const Observation& observation,
                            const nlohmann::json& extra_messages);

/// @brief Turns one chat-completions response body into a checked action, or the reason it
/// cannot be used (not JSON, server error, truncated, no call, unknown tool or placement,
/// missing tools, a mapping the executor would reject).
Result<AgentAction> parse_chat_response(std::string_view body, const Observation& observation);

/// @brief Extracts the first balanced JSON object from text (code fences and prose around it
/// are ignored); empty when there is none.
std::string first_json_object(std::string_view text);

/// @brief The LLM agent. Not thread-safe (one HTTP client, counters).
class LlmAgent final : public Agent {
 public:
  /// @param fallback answers when the model does not (default: a BuiltinAgent).
  explicit LlmAgent(LlmConfig config, std::shared_ptr<Agent> fallback = nullptr);
  [[nodiscard]] std::string_view name() const override { return "llm"; }
  /// @brief Never fails: after max_attempts bad answers, or once budget_s is spent, the
  /// fallback answers, and the action's log says why.
  Result<AgentAction> act(const Observation& observation) override;

  [[nodiscard]] std::uint64_t requests() const { return requests_; }
  [[nodiscard]] std::uint64_t fallbacks() const { return fallbacks_; }

 private:
  /// The raw response body, or why there is none: transport error, a body beyond
  /// max_response_bytes, or the deadline (the end of act()'s budget) reached first.
  Result<std::string> post(const nlohmann::json& body,
                           std::chrono::steady_clock::time_point deadline);

  LlmConfig config_;
  std::shared_ptr<Agent> fallback_;
  std::string scheme_host_port_;
  std::string path_;
  std::uint64_t requests_ = 0;
  std::uint64_t fallbacks_ = 0;
};

/// @brief Names accepted by make_agent: "builtin", "llm".
const std::vector<std::string>& agent_names();

/// @brief "builtin", or "llm" configured by `llm` (an error if absent); unknown names get a
/// suggestion.
Result<std::shared_ptr<Agent>> make_agent(std::string_view kind,
                                          const std::optional<LlmConfig>& llm = std::nullopt);

}  // namespace corun::mapping
