// The LLM agent against a local HTTP server that speaks the OpenAI chat-completions protocol
// and answers from a script: good, malformed, truncated, hallucinated, slow and failing
// answers. The agent must survive every one, retry with the error message, and fall back to
// the built-in agent with a logged reason.
#include "corun/mapping/llm_agent.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <thread>

#include "test_util.h"

namespace corun::mapping::llm_agent_test {
namespace {

using testing::make_problem;

/// How a scripted answer misbehaves on the wire.
enum class Fault {
  kNone,
  kStreamForever,  ///< a chunked body that never ends (a chunk every 10 ms until stopped)
  kCloseMidBody,   ///< announces `body` but closes the connection after its first 100 bytes
};

/// One scripted answer: HTTP status, body, a delay before answering, and a fault.
struct Reply {
  int status = 200;
  std::string body;
  int delay_ms = 0;
  Fault fault = Fault::kNone;
};

/// A chat-completions endpoint on 127.0.0.1 that plays replies in order (the last one
/// repeats) and keeps every request body.
class ScriptedServer {
 public:
  explicit ScriptedServer(std::deque<Reply> replies) : replies_(std::move(replies)) {
    server_.Post("/v1/chat/completions",
                 [this](const httplib::Request& req, httplib::Response& res) {
                   Reply r;
                   {
                     std::lock_guard<std::mutex> lock(mu_);
                     requests_.push_back(req.body);
                     auth_.push_back(req.get_header_value("Authorization"));
                     r = replies_.front();
                     if (replies_.size() > 1) replies_.pop_front();
                   }
                   if (r.delay_ms > 0)
                     std::this_thread::sleep_for(std::chrono::milliseconds(r.delay_ms));
                   res.status = r.status;
                   switch (r.fault) {
                     case Fault::kNone:
                       res.set_content(r.body, "application/json");
                       break;
                     case Fault::kStreamForever:
                       res.set_chunked_content_provider(
                           "application/json", [this](std::size_t, httplib::DataSink& sink) {
                             const std::string chunk = "{\"choices\": [                 ";
                             if (!sink.write(chunk.data(), chunk.size())) return false;
                             std::this_thread::sleep_for(std::chrono::milliseconds(10));
                             return !stopping_.load();
                           });
                       break;
                     case Fault::kCloseMidBody:
                       res.set_content_provider(
                           r.body.size(), "application/json",
                           [body = r.body](std::size_t, std::size_t, httplib::DataSink& sink) {
                             sink.write(body.data(), 100);
                             return false;  // the server closes the connection here
                           });
                       break;
                   }
                 });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // The socket already listens (bind_to_any_port); wait for the accept loop anyway.
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~ScriptedServer() {
    stopping_ = true;
    server_.stop();
    thread_.join();
  }
  [[nodiscard]] std::string url() const {
    return "http://127.0.0.1:" + std::to_string(port_) + "/v1";
  }
  std::vector<std::string> requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }
  std::vector<std::string> auth() {
    std::lock_guard<std::mutex> lock(mu_);
    return auth_;
  }

 private:
  httplib::Server server_;
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::deque<Reply> replies_;
  std::vector<std::string> requests_;
  std::vector<std::string> auth_;
  int port_ = 0;
  std::thread thread_;
};

/// A chat completion whose single tool call carries `arguments` (a JSON string by default).
std::string tool_call(const nlohmann::json& arguments, bool as_string = true,
                      const std::string& finish = "tool_calls") {
  nlohmann::json call = {
      {"id", "call_1"},
      {"type", "function"},
      {"function",
       {{"name", "act"}, {"arguments", as_string ? nlohmann::json(arguments.dump()) : arguments}}}};
  return nlohmann::json{
      {"id", "chatcmpl-1"},
      {"object", "chat.completion"},
      {"choices",
       {{{"index", 0},
         {"finish_reason", finish},
         {"message", {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", {call}}}}}}}}
      .dump();
}

std::string content_answer(const std::string& text) {
  return nlohmann::json{{"choices",
                         {{{"index", 0},
                           {"finish_reason", "stop"},
                           {"message", {{"role", "assistant"}, {"content", text}}}}}}}
      .dump();
}

/// A valid answer: a on the CPU, b queued for the GPU.
nlohmann::json good_args() {
  return {{"mapping", {{"a", "cpu"}, {"b", "gpu_queue"}}}, {"done", false}, {"reason", "try it"}};
}

/// A two-tool problem whose first tool (conv, 2 GB) cannot use the GPU under 1 GB.
struct Fixture {
  PlacementProblem problem = make_problem({{"a", "conv", {}, 0}, {"b", "small", {}, 0}}, 1);
  Executor executor{problem};
  TrialRunner runner{executor};
  Monitor monitor{runner, Context{.seed = 1}};
};

LlmConfig config_for(const ScriptedServer& s, double timeout_s = 5) {
  LlmConfig c;
  c.url = s.url();
  c.model = "test-model";
  c.api_key = "sk-test";
  c.timeout_s = timeout_s;
  c.max_attempts = 3;
  return c;
}

bool log_contains(const AgentAction& a, const std::string& needle) {
  for (const auto& l : a.log) {
    if (l.find(needle) != std::string::npos) return true;
  }
  return false;
}

TEST(LlmAgent, GoodAnswerIsParsedAndTheRequestForcesTheEnumSchema) {
  ScriptedServer server({{200, tool_call(good_args())}});
  Fixture f;
  LlmAgent agent(config_for(server));
  auto a = agent.act(f.monitor.observe());
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(a->mapping);
  EXPECT_EQ(*a->mapping, (Mapping{Placement::kCpu, Placement::kGpuQueue}));
  EXPECT_EQ(agent.fallbacks(), 0u);
  const auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 1u);
  const auto body = nlohmann::json::parse(reqs[0]);
  EXPECT_EQ(body["model"], "test-model");
  EXPECT_EQ(body["tool_choice"]["function"]["name"], "act");
  const auto& props = body["tools"][0]["function"]["parameters"]["properties"];
  // a may only run on the CPU: the schema's enum says so.
  EXPECT_EQ(props["mapping"]["properties"]["a"]["enum"], nlohmann::json({"cpu"}));
  EXPECT_EQ(props["mapping"]["properties"]["b"]["enum"],
            nlohmann::json({"gpu_now", "gpu_queue", "cpu"}));
  EXPECT_EQ(server.auth()[0], "Bearer sk-test");
}

TEST(LlmAgent, AcceptsArgumentsAsAnObjectAndJsonInsideProse) {
  ScriptedServer server(
      {{200, tool_call(good_args(), false)},
       {200, content_answer("Sure! Here is my call:\n```json\n" + good_args().dump() +
                            "\n```\nHope it helps {not json")}});
  Fixture f;
  LlmAgent agent(config_for(server));
  for (int k = 0; k < 2; ++k) {
    auto a = agent.act(f.monitor.observe());
    ASSERT_TRUE(a.ok());
    ASSERT_TRUE(a->mapping) << k;
    EXPECT_EQ(*a->mapping, (Mapping{Placement::kCpu, Placement::kGpuQueue}));
  }
  EXPECT_EQ(agent.requests(), 2u);
  EXPECT_EQ(agent.fallbacks(), 0u);
}

TEST(LlmAgent, RetriesMalformedTruncatedAndHallucinatedAnswersWithTheError) {
  nlohmann::json unknown_tool = good_args();
  unknown_tool["mapping"] = {{"a", "cpu"}, {"b", "gpu_queue"}, {"c", "cpu"}};
  ScriptedServer server({
      {200, "this is not json {"},
      {200, tool_call(good_args(), true, "length")},
      {200, tool_call(unknown_tool)},
      {200, tool_call(good_args())},
  });
  Fixture f;
  LlmConfig c = config_for(server);
  c.max_attempts = 4;
  LlmAgent agent(c);
  auto a = agent.act(f.monitor.observe());
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(a->mapping);
  EXPECT_EQ(*a->mapping, (Mapping{Placement::kCpu, Placement::kGpuQueue}));
  EXPECT_EQ(agent.fallbacks(), 0u);
  EXPECT_TRUE(log_contains(*a, "not JSON"));
  EXPECT_TRUE(log_contains(*a, "truncated"));
  EXPECT_TRUE(log_contains(*a, "unknown tool 'c'"));
  // Each retry carries the reason of the previous rejection back to the model.
  const auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 4u);
  EXPECT_NE(reqs[1].find("rejected: the response is not JSON"), std::string::npos);
  EXPECT_NE(reqs[3].find("unknown tool 'c'"), std::string::npos);
}

TEST(LlmAgent, RejectsPlacementsThatAreNotAllowedOrDoNotExist) {
  nlohmann::json too_big = good_args();
  too_big["mapping"] = {{"a", "gpu_queue"}, {"b", "cpu"}};  // a needs 2 GB of 1 GB
  nlohmann::json tpu = good_args();
  tpu["mapping"] = {{"a", "cpu"}, {"b", "tpu"}};
  nlohmann::json missing = good_args();
  missing["mapping"] = {{"a", "cpu"}};
  nlohmann::json bad_probe = {{"probes", {{{"kind", "teleport"}, {"tool", "b"}}}}, {"done", false}};
  Fixture f;
  const Observation o = f.monitor.observe();
  auto r1 = parse_chat_response(tool_call(too_big), o);
  ASSERT_FALSE(r1.ok());
  EXPECT_NE(r1.error().what().find("cannot run on gpu_queue"), std::string::npos);
  auto r2 = parse_chat_response(tool_call(tpu), o);
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.error().what().find("'tpu' is not a placement"), std::string::npos);
  auto r3 = parse_chat_response(tool_call(missing), o);
  ASSERT_FALSE(r3.ok());
  EXPECT_NE(r3.error().what().find("missing: b"), std::string::npos);
  auto r4 = parse_chat_response(tool_call(bad_probe), o);
  ASSERT_FALSE(r4.ok());  // also: nothing runs yet, so a mapping is required
  auto r5 = parse_chat_response(R"({"error": {"message": "model not found"}})", o);
  ASSERT_FALSE(r5.ok());
  EXPECT_NE(r5.error().what().find("model not found"), std::string::npos);
  auto r6 = parse_chat_response(R"({"choices": []})", o);
  EXPECT_FALSE(r6.ok());
  auto r7 = parse_chat_response(R"([1, 2, 3])", o);
  EXPECT_FALSE(r7.ok());
}

TEST(LlmAgent, SlowServerTimesOutAndFallsBackWithALoggedReason) {
  ScriptedServer server({{200, tool_call(good_args()), 1500}});
  Fixture f;
  LlmAgent agent(config_for(server, 0.2));
  const Observation o = f.monitor.observe();
  auto a = agent.act(o);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(agent.fallbacks(), 1u);
  EXPECT_EQ(agent.requests(), 3u);
  EXPECT_TRUE(log_contains(*a, "falling back to the builtin agent"));
  EXPECT_TRUE(log_contains(*a, "failed"));
  // The fallback answers exactly what the built-in agent answers.
  BuiltinAgent builtin;
  auto expected = builtin.act(o);
  ASSERT_TRUE(expected.ok());
  EXPECT_EQ(a->mapping, expected->mapping);
}

// Faults of the wire, not of the answer: each must end in the built-in agent's answer, with
// the reason logged, within the act() budget. The bound asserted is generous (budget + 2 s) so
// that a loaded machine cannot fail it; without the budget these cases take minutes or never
// end (per-request timeouts do not fire while bytes keep coming).
class LlmAgentFault : public ::testing::Test {
 protected:
  /// Runs one act() against `server` with a budget of `budget_s` and checks the fallback.
  void expect_fallback_within_budget(ScriptedServer& server, double budget_s,
                                     const std::string& reason) {
    Fixture f;
    LlmConfig c = config_for(server, 5);  // per-request timeouts above the budget
    c.budget_s = budget_s;
    LlmAgent agent(c);
    const Observation o = f.monitor.observe();
    const auto start = std::chrono::steady_clock::now();
    auto a = agent.act(o);
    const double elapsed_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(agent.fallbacks(), 1u);
    EXPECT_TRUE(log_contains(*a, "falling back to the builtin agent"))
        << ::testing::PrintToString(a->log);
    EXPECT_TRUE(log_contains(*a, reason)) << ::testing::PrintToString(a->log);
    EXPECT_EQ(a->reason.rfind("fallback (builtin)", 0), 0u) << a->reason;
    EXPECT_LT(elapsed_s, budget_s + 2.0);
    BuiltinAgent builtin;
    auto expected = builtin.act(o);
    ASSERT_TRUE(expected.ok());
    EXPECT_EQ(a->mapping, expected->mapping);
  }
};

TEST_F(LlmAgentFault, AServerThatStreamsForeverIsAbandonedAtTheBudget) {
  ScriptedServer server({{200, "", 0, Fault::kStreamForever}});
  expect_fallback_within_budget(server, 1.0, "no complete answer within the time budget of 1 s");
}

TEST_F(LlmAgentFault, ATenMegabyteAnswerIsAbandonedAtTheSizeLimit) {
  // 10 MB of valid JSON: the limit (4 MiB) stops it, not a parse error after reading it all.
  std::string huge = R"({"choices": [], "padding": ")" + std::string(10'000'000, 'x') + "\"}";
  ScriptedServer server({{200, std::move(huge)}});
  expect_fallback_within_budget(server, 10.0, "exceeds 4194304 bytes");
  EXPECT_EQ(server.requests().size(), 3u);  // each attempt is abandoned, then the fallback
}

TEST_F(LlmAgentFault, AConnectionClosedMidBodyIsRetriedThenFallsBack) {
  ScriptedServer server({{200, tool_call(good_args()), 0, Fault::kCloseMidBody}});
  expect_fallback_within_budget(server, 10.0, "closed the connection");
  EXPECT_EQ(server.requests().size(), 3u);
}

TEST_F(LlmAgentFault, AServerThatStallsIsCutAtTheBudgetNotAtEachTimeout) {
  // Each request would wait its 5 s read timeout three times (15 s); the budget ends it.
  ScriptedServer server({{200, tool_call(good_args()), 3000}});
  expect_fallback_within_budget(server, 1.0, "time budget of 1 s");
  EXPECT_EQ(server.requests().size(), 1u);
}

TEST(LlmAgent, ServerErrorsAndUnreachableServersFallBack) {
  ScriptedServer server({{500, R"({"error": "overloaded"})"}});
  Fixture f;
  LlmAgent agent(config_for(server));
  auto a = agent.act(f.monitor.observe());
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(log_contains(*a, "HTTP 500"));
  EXPECT_EQ(agent.fallbacks(), 1u);
  LlmConfig dead;
  dead.url = "http://127.0.0.1:1/v1";  // nothing listens on port 1
  dead.timeout_s = 0.5;
  LlmAgent unreachable(dead);
  auto b = unreachable.act(f.monitor.observe());
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(unreachable.fallbacks(), 1u);
  LlmConfig no_scheme;
  no_scheme.url = "localhost:8080";
  LlmAgent bad_url(no_scheme);
  auto c = bad_url.act(f.monitor.observe());
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(log_contains(*c, "needs a scheme"));
}

TEST(LlmAgent, AWholePolicyRunSurvivesAServerThatOnlyTalksNonsense) {
  ScriptedServer server({{200, content_answer("I would put everything on the GPU.")}});
  Fixture f;
  auto agent = std::make_shared<LlmAgent>(config_for(server));
  AgentPolicy policy(agent);
  auto r = policy.decide(f.runner, Context{.seed = 1});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(f.problem.validate(r->mapping).ok());
  EXPECT_GE(agent->fallbacks(), 1u);
  bool logged = false;
  for (const auto& l : r->log) logged = logged || l.find("falling back") != std::string::npos;
  EXPECT_TRUE(logged);
}

TEST(LlmAgent, ProbesAndDoneAreUnderstood) {
  Fixture f;
  f.monitor.execute(Mapping{Placement::kCpu, Placement::kGpuQueue});
  const Observation o = f.monitor.observe();
  const nlohmann::json probes = {
      {"probes",
       {{{"kind", "move"}, {"tool", "b"}, {"to", "cpu"}},
        {{"kind", "pair"}, {"tool", "b"}, {"to", "gpu_now"}, {"with", "a"}, {"with_to", "cpu"}}}},
      {"done", false}};
  auto r = parse_chat_response(tool_call(probes), o);
  // The pair leaves a where it is: rejected, with the reason.
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().what().find("does not change"), std::string::npos);
  const nlohmann::json ok = {{"probes", {{{"kind", "move"}, {"tool", "b"}, {"to", "cpu"}}}},
                             {"done", "false"}};
  auto r2 = parse_chat_response(tool_call(ok), o);
  ASSERT_TRUE(r2.ok()) << r2.error().what();
  ASSERT_EQ(r2->probes.size(), 1u);
  EXPECT_EQ(r2->probes[0], ProbeRequest::move(1, Placement::kCpu));
  auto r3 = parse_chat_response(tool_call(nlohmann::json{{"done", true}}), o);
  ASSERT_TRUE(r3.ok());
  EXPECT_TRUE(r3->done);
}

TEST(LlmAgent, FirstJsonObjectHandlesNestingStringsAndTruncation) {
  EXPECT_EQ(first_json_object(R"(x {"a": {"b": "}"}} y {"c": 1})"), R"({"a": {"b": "}"}})");
  EXPECT_EQ(first_json_object(R"({"q": "say \"}\" please"})"), R"({"q": "say \"}\" please"})");
  EXPECT_EQ(first_json_object(R"({"a": {"b": 1})"), "");
  EXPECT_EQ(first_json_object("no json here"), "");
}

TEST(LlmConfig, ComesFromTheEnvironment) {
  ::unsetenv("CORUN_LLM_URL");
  EXPECT_FALSE(LlmConfig::from_env().ok());
  ::setenv("CORUN_LLM_URL", "http://127.0.0.1:8080/v1", 1);
  ::setenv("CORUN_LLM_MODEL", "qwen2.5-7b-instruct", 1);
  ::setenv("CORUN_LLM_API_KEY", "secret", 1);
  ::setenv("CORUN_LLM_TIMEOUT_S", "abc", 1);
  EXPECT_FALSE(LlmConfig::from_env().ok());
  ::setenv("CORUN_LLM_TIMEOUT_S", "30", 1);
  ::setenv("CORUN_LLM_BUDGET_S", "-1", 1);
  EXPECT_FALSE(LlmConfig::from_env().ok());
  ::setenv("CORUN_LLM_BUDGET_S", "90", 1);
  auto c = LlmConfig::from_env();
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->model, "qwen2.5-7b-instruct");
  EXPECT_EQ(c->api_key, "secret");
  EXPECT_EQ(c->timeout_s, 30);
  EXPECT_EQ(c->budget_s, 90);
  EXPECT_EQ(c->tool_choice, "named");
  ::setenv("CORUN_LLM_TOOL_CHOICE", "require", 1);
  auto typo = LlmConfig::from_env();
  ASSERT_FALSE(typo.ok());
  EXPECT_NE(typo.error().what().find("did you mean 'required'"), std::string::npos);
  ::setenv("CORUN_LLM_TOOL_CHOICE", "required", 1);
  ASSERT_TRUE(LlmConfig::from_env().ok());
  // llama.cpp accepts tool_choice only as a string.
  Fixture f;
  LlmConfig required = *LlmConfig::from_env();
  EXPECT_EQ(chat_request(required, f.monitor.observe(), nlohmann::json::array())["tool_choice"],
            "required");
  for (const char* v : {"CORUN_LLM_URL", "CORUN_LLM_MODEL", "CORUN_LLM_API_KEY",
                        "CORUN_LLM_TIMEOUT_S", "CORUN_LLM_BUDGET_S", "CORUN_LLM_TOOL_CHOICE"}) {
    ::unsetenv(v);
  }
  EXPECT_FALSE(make_agent("llm").ok());
  EXPECT_TRUE(make_agent("builtin").ok());
  auto bad = make_agent("buildin");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().what().find("did you mean 'builtin'"), std::string::npos);
}

}  // namespace
}  // namespace corun::mapping::llm_agent_test
