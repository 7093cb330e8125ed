// docs/openapi.yaml against docs/serve.md (every route of its API table with its token, body
// and answers; every JSON example) and against a running `corun serve` (every route's answers,
// successes and errors, validate against the schema the document gives for their status).
#include "corun/serve/openapi.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "../core/child_process.h"
#include "../serve/serve_test_util.h"
#include "corun/spec/knobs.h"
#include "schema_check.h"

namespace corun::openapi_test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::OpenApiDoc;
using testing::yaml_to_json;

const fs::path kSource = CORUN_SOURCE_DIR;

std::string read(const fs::path& p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

const OpenApiDoc& doc() {
  static const OpenApiDoc d(YAML::LoadFile((kSource / "docs/openapi.yaml").string()));
  return d;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// "/v1/models/NAME/demand" (docs/serve.md) -> "/v1/models/{name}/demand" (OpenAPI).
std::string template_path(std::string p) {
  const auto q = p.find('?');
  if (q != std::string::npos) p = p.substr(0, q);
  return std::regex_replace(p, std::regex("/NAME(/|$)"), "/{name}$1");
}

// The operation `method` of `path`; for a 405 (a method the path does not have), any of the
// path's operations, all of which document the 405.
YAML::Node operation(const std::string& path, const std::string& method, int status) {
  const YAML::Node item = doc().root()["paths"][path];
  if (!item) return YAML::Node();
  if (item[lower(method)]) return item[lower(method)];
  if (status != 405) return YAML::Node();
  for (const auto& kv : item) {
    if (kv.first.Scalar() != "parameters") return kv.second;
  }
  return YAML::Node();
}

// The schema of an operation's answer with `status` (undefined node when not documented).
YAML::Node response_schema(const std::string& path, const std::string& method, int status,
                           const std::string& media = "application/json") {
  const YAML::Node op = operation(path, method, status);
  if (!op || !op["responses"][std::to_string(status)]) return YAML::Node();
  const YAML::Node resp = doc().resolve(op["responses"][std::to_string(status)]);
  if (!resp || !resp["content"] || !resp["content"][media]) return YAML::Node();
  return resp["content"][media]["schema"];
}

std::string join_errors(const std::vector<std::string>& e) {
  std::string out;
  for (const auto& s : e) out += "\n  " + s;
  return out;
}

// docs/serve.md's placeholders inside JSON examples: ENTRY, PLAN, SAMPLE, SUMMARY and DEMAND
// stand for an example of their schema (the document's own), `, ...` for more of the same,
// n and k for counts.
std::string substitute_placeholders(std::string text) {
  const std::vector<std::pair<std::string, std::string>> names = {
      {"ENTRY", "ModelEntry"},         {"PLAN", "Plan"},     {"SAMPLE", "TelemetrySample"},
      {"SUMMARY", "TelemetrySummary"}, {"DEMAND", "Demand"}, {"DAG", "PlaceRequest"},
      {"PLACEMENT", "ToolPlacement"}};
  text = std::regex_replace(text, std::regex(",\\s*\\.\\.\\."), "");
  for (const auto& [word, schema] : names) {
    const std::string example = yaml_to_json(doc().schema(schema)["example"]).dump();
    text = std::regex_replace(text, std::regex("\\b" + word + "\\b(?!\")"), example);
  }
  return std::regex_replace(text, std::regex(":\\s*(n|k)\\b"), ":1");
}

struct Route {
  std::string method, path;  // path as OpenAPI writes it
  std::string token, body, answer;
};

std::vector<Route> api_table_routes(const std::string& md) {
  std::vector<Route> out;
  std::istringstream in(md);
  std::string line;
  static const std::regex row(R"(^\| `(GET|POST|PUT|DELETE) ([^`]+)` \|(.*)$)");
  while (std::getline(in, line)) {
    std::smatch m;
    if (!std::regex_match(line, m, row)) continue;
    std::vector<std::string> cells;
    std::string rest = m[3];
    std::size_t pos = 0;
    while ((pos = rest.find('|')) != std::string::npos) {
      std::string c = rest.substr(0, pos);
      c.erase(0, c.find_first_not_of(' '));
      c.erase(c.find_last_not_of(' ') + 1);
      cells.push_back(c);
      rest = rest.substr(pos + 1);
    }
    EXPECT_EQ(cells.size(), 3u) << line;
    if (cells.size() != 3) continue;
    out.push_back({m[1], template_path(m[2]), cells[0], cells[1], cells[2]});
  }
  return out;
}

TEST(OpenApi, IsOpenApi3WithResolvableReferencesAndKnownKeywords) {
  const YAML::Node root = doc().root();
  EXPECT_EQ(root["openapi"].as<std::string>(), "3.0.3");
  EXPECT_TRUE(root["info"]["title"]);
  // Every $ref anywhere resolves.
  std::vector<YAML::Node> stack = {root};
  int refs = 0;
  while (!stack.empty()) {
    const YAML::Node n = stack.back();
    stack.pop_back();
    if (n.IsMap()) {
      if (n["$ref"]) {
        ++refs;
        EXPECT_TRUE(doc().resolve(n)) << n["$ref"].as<std::string>();
      }
      for (const auto& kv : n) stack.push_back(kv.second);
    } else if (n.IsSequence()) {
      for (const auto& e : n) stack.push_back(e);
    }
  }
  EXPECT_GT(refs, 40);
  // Every schema's own example validates (and the validator knows every keyword used).
  int examples = 0;
  for (const auto& kv : root["components"]["schemas"]) {
    const std::string name = kv.first.as<std::string>();
    const auto unknown = doc().unknown_keywords(kv.second, name);
    EXPECT_TRUE(unknown.empty()) << join_errors(unknown);
    if (!kv.second["example"]) continue;
    ++examples;
    const auto errors = doc().validate(yaml_to_json(kv.second["example"]), kv.second);
    EXPECT_TRUE(errors.empty()) << name << join_errors(errors);
  }
  EXPECT_GE(examples, 10);
  // And so does every example of a shared error response.
  for (const auto& kv : root["components"]["responses"]) {
    const YAML::Node c = kv.second["content"]["application/json"];
    const auto errors = doc().validate(yaml_to_json(c["example"]), c["schema"]);
    EXPECT_TRUE(errors.empty()) << kv.first.as<std::string>() << join_errors(errors);
  }
}

TEST(OpenApi, ValidatorRejectsWhatTheSchemasForbid) {
  // The checks below would pass vacuously with a validator that accepts everything.
  const YAML::Node sample = doc().schema("TelemetrySample");
  EXPECT_TRUE(doc().validate(json::parse(R"({"model":"a","throughput":1})"), sample).empty());
  EXPECT_FALSE(doc().validate(json::parse(R"({"model":"a"})"), sample).empty());  // no metric
  EXPECT_FALSE(doc().validate(json::parse(R"({"model":"a","thruput":1})"), sample).empty());
  EXPECT_FALSE(doc().validate(json::parse(R"({"model":"a","throughput":-1})"), sample).empty());
  EXPECT_FALSE(doc().validate(json::parse(R"({"model":1,"throughput":1})"), sample).empty());
  const YAML::Node err = doc().schema("Error");
  EXPECT_FALSE(
      doc().validate(json::parse(R"({"error":{"code":"nope","message":"m"}})"), err).empty());
  const YAML::Node req = doc().schema("TelemetryRequest");
  EXPECT_FALSE(doc().validate(json::array(), req).empty());  // minItems 1
  EXPECT_FALSE(doc().validate(json::parse(R"({"plans": 3})"), doc().schema("PlanHistory")).empty());
}

TEST(OpenApi, EveryRouteOfServeMdIsDocumentedAndNothingElse) {
  const auto routes = api_table_routes(read(kSource / "docs/serve.md"));
  ASSERT_GE(routes.size(), 12u);
  std::set<std::pair<std::string, std::string>> in_md;
  for (const auto& r : routes) {
    SCOPED_TRACE(r.method + " " + r.path);
    in_md.insert({lower(r.method), r.path});
    const YAML::Node op = doc().root()["paths"][r.path][lower(r.method)];
    ASSERT_TRUE(op) << "not in docs/openapi.yaml";
    // A route that needs the token says so with the bearer scheme, and only those.
    EXPECT_EQ(r.token == "yes", static_cast<bool>(op["security"]));
    // Every status the answer names is a documented response.
    std::smatch m;
    std::string answer = r.answer;
    int statuses = 0;
    while (std::regex_search(answer, m, std::regex("\\b([1-5][0-9][0-9])\\b"))) {
      EXPECT_TRUE(op["responses"][m[1].str()]) << "status " << m[1] << " undocumented";
      ++statuses;
      answer = m.suffix();
    }
    EXPECT_GT(statuses, 0);
    // The body column names the request schema.
    const YAML::Node body = op["requestBody"];
    EXPECT_EQ(r.body.empty(), !body);
    if (body) {
      const std::string ref =
          body["content"]["application/json"]["schema"]["$ref"].as<std::string>();
      // Each placeholder's schema, and whether the body may be left out.
      const std::map<std::string, std::pair<std::string, bool>> placeholder = {
          {"ENTRY", {"ModelEntry", true}},          {"DEMAND", {"Demand", true}},
          {"SAMPLE", {"TelemetryRequest", true}},   {"DAG", {"PlaceRequest", true}},
          {"CAPACITY", {"CapacityRequest", false}}, {"none", {"ReplanRequest", false}}};
      const std::string first = r.body.substr(0, r.body.find(' '));
      ASSERT_TRUE(placeholder.count(first)) << r.body;
      EXPECT_EQ(ref, "#/components/schemas/" + placeholder.at(first).first);
      EXPECT_EQ(body["required"].as<bool>(), placeholder.at(first).second);
      // An optional body says so in the table.
      EXPECT_EQ(r.body.find("(optional)") != std::string::npos,
                !placeholder.at(first).second && first != "none");
    }
  }
  for (const auto& p : doc().root()["paths"]) {
    for (const auto& op : p.second) {
      const std::string method = op.first.as<std::string>();
      if (method == "parameters") continue;
      EXPECT_TRUE(in_md.count({method, p.first.as<std::string>()}))
          << method << " " << p.first << " is not in docs/serve.md";
    }
  }
}

TEST(OpenApi, EveryJsonExampleOfServeMdValidates) {
  std::string md = read(kSource / "docs/serve.md");
  int checked = 0;
  // 1. The API table: the body column against the request schema, the answer column against
  // the response schema of the status written before each example.
  for (const auto& r : api_table_routes(md)) {
    const YAML::Node op = doc().root()["paths"][r.path][lower(r.method)];
    ASSERT_TRUE(op);
    for (const auto& [cell, is_body] : {std::pair{r.body, true}, std::pair{r.answer, false}}) {
      std::string rest = cell;
      std::string status;
      std::smatch m;
      static const std::regex piece(R"(\b([1-5][0-9][0-9])\b|`([^`]*)`)");
      while (std::regex_search(rest, m, piece)) {
        const bool is_status = m[1].matched;
        const std::string text = is_status ? m[1].str() : m[2].str();
        rest = m.suffix();
        if (is_status) {
          status = text;
          continue;
        }
        const std::string& span = text;
        if (span.empty() || (span[0] != '{' && span[0] != '[')) {
          // `no_plan` and the like: an error code the document knows.
          if (!is_body && std::regex_match(span, std::regex("[a-z_]+"))) {
            const auto e = doc().validate(json(span), doc().schema("ErrorCode"));
            EXPECT_TRUE(e.empty()) << r.path << ": " << span << join_errors(e);
          }
          continue;
        }
        const json example = json::parse(substitute_placeholders(span), nullptr, false);
        ASSERT_FALSE(example.is_discarded()) << r.path << ": " << span;
        const YAML::Node schema =
            is_body ? YAML::Node(op["requestBody"]["content"]["application/json"]["schema"])
                    : response_schema(r.path, r.method, std::stoi(status));
        ASSERT_TRUE(schema) << r.method << " " << r.path << " " << status;
        const auto errors = doc().validate(example, schema);
        EXPECT_TRUE(errors.empty())
            << r.method << " " << r.path << ": " << span << join_errors(errors);
        ++checked;
      }
    }
  }
  EXPECT_GE(checked, 11);
  // 2. Everything else: fenced ```json blocks and inline JSON in prose, each against the schema
  // its paragraph introduces (**ENTRY**, **DEMAND**, **SAMPLE**, **PLAN**; the Errors section).
  const std::map<std::string, std::string> markers = {
      {"ENTRY", "ModelEntry"},         {"DEMAND", "Demand"},
      {"SAMPLE", "TelemetrySample"},   {"PLAN", "Plan"},
      {"DAG", "PlaceRequest"},         {"PLACEMENT", "ToolPlacement"},
      {"CAPACITY", "CapacityRequest"}, {"Errors", "Error"}};
  std::string context;
  std::istringstream in(md);
  std::string line, block, paragraph;
  bool fenced = false;
  int prose = 0;
  auto check_example = [&](const std::string& text, const std::string& where) {
    const json example = json::parse(text, nullptr, false);
    ASSERT_FALSE(example.is_discarded()) << where << ": " << text;
    ASSERT_TRUE(markers.count(context)) << "no schema for the example " << text;
    const auto errors = doc().validate(example, doc().schema(markers.at(context)));
    EXPECT_TRUE(errors.empty()) << context << ": " << text << join_errors(errors);
    ++prose;
  };
  auto flush_paragraph = [&] {
    // Inline JSON of a prose paragraph (spans may wrap lines).
    std::smatch m;
    std::string rest = paragraph;
    while (std::regex_search(rest, m, std::regex("`([^`]*)`"))) {
      const std::string span = m[1];
      rest = m.suffix();
      if (!span.empty() && span[0] == '{') check_example(span, "inline");
    }
    paragraph.clear();
  };
  bool json_fence = false;
  while (std::getline(in, line)) {
    if (line.rfind("```", 0) == 0) {
      if (!fenced) {
        fenced = true;
        json_fence = line.rfind("```json", 0) == 0;
        block.clear();
      } else {
        if (json_fence) check_example(block, "```json block");
        fenced = false;
      }
      continue;
    }
    if (fenced) {
      block += line + "\n";
      continue;
    }
    if (line.rfind("#", 0) == 0) {
      flush_paragraph();
      context = line.substr(line.find_first_not_of("# "));
      continue;
    }
    if (line.rfind("|", 0) == 0) continue;  // tables: checked above
    std::smatch m;
    if (std::regex_search(line, m, std::regex(R"(\*\*([A-Z]+)\*\*)"))) context = m[1];
    if (line.empty()) {
      flush_paragraph();
    } else {
      paragraph += line + " ";
    }
  }
  flush_paragraph();
  // ENTRY, SAMPLE and PLAN blocks, the two DEMAND examples and the error shape.
  EXPECT_GE(prose, 6);
}

TEST(OpenApi, ErrorCodesAndKnobsMatchTheirDeclarations) {
  // The error table of docs/serve.md and the ErrorCode enum list the same codes.
  const std::string md = read(kSource / "docs/serve.md");
  const auto errors_at = md.find("### Errors");
  ASSERT_NE(errors_at, std::string::npos);
  std::set<std::string> in_md;
  std::istringstream in(md.substr(errors_at));
  std::string line;
  static const std::regex row(R"(^\| ([1-5][0-9][0-9]) \| (.*) \| .* \|$)");
  while (std::getline(in, line)) {
    std::smatch m;
    if (!std::regex_match(line, m, row)) continue;
    std::string codes = m[2];
    std::smatch c;
    while (std::regex_search(codes, c, std::regex("`([a-z_]+)`"))) {
      in_md.insert(c[1]);
      codes = c.suffix();
    }
  }
  std::set<std::string> in_doc;
  for (const auto& e : doc().schema("ErrorCode")["enum"]) in_doc.insert(e.as<std::string>());
  EXPECT_EQ(in_md, in_doc);
  // The registration schema knows every knob of the vocabulary (spec/knobs.cc), and no other.
  std::set<std::string> knobs;
  for (const auto& kv : doc().schema("Knobs")["properties"]) knobs.insert(kv.first.Scalar());
  std::set<std::string> declared(knob_names().begin(), knob_names().end());
  EXPECT_EQ(knobs, declared);
}

// ---------------------------------------------------------------------------------------------
// Against the real server

constexpr const char* kToken = "openapi-test-token-0123456789";

// `corun serve` as a child process, killed and reaped at scope exit.
class Server {
 public:
  explicit Server(const fs::path& dir) {
    const auto token = dir / "token";
    const auto port_file = dir / "port";
    std::ofstream(token) << kToken << "\n";
    testing::ChildOptions options;
    options.stdout_path = options.stderr_path = dir / "serve.log";
    process_ =
        testing::ChildProcess({CORUN_BINARY, "serve", "--state", (dir / "state").string(), "--port",
                               "0", "--port-file", port_file.string(), "--token-file",
                               token.string(), "--solver", "greedy", "--min-replan-ms", "20"},
                              options);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      std::ifstream in(port_file);
      if (in >> port_ && port_ > 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;
  [[nodiscard]] int port() const { return port_; }

 private:
  testing::ChildProcess process_;
  int port_ = 0;
};

// YAML 1.2 core schema, tag resolution of plain scalars (yaml.org/spec/1.2.2, 10.3.2): what
// `GET /v1/openapi.json` turns the YAML document into.
TEST(OpenApi, YamlScalarsBecomeJsonTypesByTheCoreSchema) {
  const json j = serve::yaml_to_json(YAML::Load(R"(
status: 200
quoted: "200"
single: '0.5'
float: 1.5e3
dot: 0.
yes: true
upper: FALSE
tilde: ~
empty:
word: text
list: [1, '2', null, -7]
neg: -.inf
)"));
  EXPECT_EQ(j["status"], 200);
  EXPECT_TRUE(j["status"].is_number_integer());
  EXPECT_EQ(j["quoted"], "200");
  EXPECT_EQ(j["single"], "0.5");
  EXPECT_EQ(j["float"], 1500.0);
  EXPECT_TRUE(j["dot"].is_number_float());
  EXPECT_EQ(j["yes"], true);
  EXPECT_EQ(j["upper"], false);
  EXPECT_TRUE(j["tilde"].is_null());
  EXPECT_TRUE(j["empty"].is_null());
  EXPECT_EQ(j["word"], "text");
  EXPECT_EQ(j["list"], json::parse(R"([1, "2", null, -7])"));
  EXPECT_TRUE(std::isinf(j["neg"].get<double>()) && j["neg"].get<double>() < 0);
}

TEST(OpenApi, EveryAnswerOfARunningServerValidates) {
  serve::testing::TempDir dir;
  Server server(dir.path());
  ASSERT_GT(server.port(), 0);
  std::set<std::pair<std::string, std::string>> succeeded;
  int checked = 0;
  // Sends one request; its status must be documented for the route and its body must
  // validate against that status's schema.
  auto call = [&](const std::string& method, const std::string& target, const std::string& body,
                  int expect, bool auth = true, const std::string& type = "application/json") {
    const auto r = serve::testing::raw_http(
        server.port(), serve::testing::request(method, target, body, auth ? kToken : "", type));
    // A concrete path to its template: /v1/models/cam0/demand -> /v1/models/{name}/demand.
    const std::string path = std::regex_replace(
        template_path(target), std::regex("^/v1/models/[^/]+"), "/v1/models/{name}");
    EXPECT_EQ(r.status, expect) << method << " " << target << " " << r.body;
    const bool text = path == "/metrics" && r.status == 200;
    const YAML::Node schema =
        response_schema(path, method, r.status, text ? "text/plain" : "application/json");
    EXPECT_TRUE(schema.IsDefined() && !schema.IsNull())
        << method << " " << target << ": status " << r.status << " is not documented";
    if (schema && !text) {
      const json j = json::parse(r.body, nullptr, false);
      const auto errors = doc().validate(j, schema);
      EXPECT_TRUE(errors.empty()) << method << " " << target << " " << r.status << ": " << r.body
                                  << join_errors(errors);
    }
    if (r.status / 100 == 2) succeeded.insert({lower(method), path});
    ++checked;
    return r;
  };
  const std::string cam0 = serve::testing::kCam0, chat = serve::testing::kChat;
  call("GET", "/healthz", "", 200);
  auto metrics = call("GET", "/metrics", "", 200);
  EXPECT_NE(metrics.head.find("Content-Type: text/plain"), std::string::npos) << metrics.head;
  call("PUT", "/healthz", "{}", 405);
  call("GET", "/v1/plan", "", 404);
  call("POST", "/v1/models", cam0, 401, false);
  call("POST", "/v1/models", cam0, 201);
  call("POST", "/v1/models", cam0, 409);
  call("POST", "/v1/models", R"({"name":"x","model":"yolo11z","demand":{"fps":1}})", 422);
  call("POST", "/v1/models", cam0, 415, true, "text/plain");
  call("POST", "/v1/models", "{", 400);
  call("POST", "/v1/models", chat, 201);
  call("GET", "/v1/models", "", 200);
  call("GET", "/v1/models/cam0", "", 200);
  call("GET", "/v1/models/nope", "", 404);
  call("PUT", "/v1/models/cam0/demand", R"({"fps": 60})", 200);
  call("PUT", "/v1/models/cam0/demand", R"({"fps": -1})", 422);
  call("PUT", "/v1/models/nope/demand", R"({"fps": 5})", 404);
  // The first plan (bounded wait; the greedy solver on two models takes milliseconds).
  json plan;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    const auto r =
        serve::testing::raw_http(server.port(), serve::testing::request("GET", "/v1/plan"));
    if (r.status == 200) {
      plan = r.json();
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(plan.is_object()) << "no plan within 30 s";
  call("GET", "/v1/plan", "", 200);
  // What-ifs: one that fits, one that cannot hold its SLA (breaks), and the refusals.
  const auto fits = call("POST", "/v1/whatif",
                         R"({"name":"cam9","model":"yolo11n","demand":{"fps":5},)"
                         R"("sla":{"latency_ms_p95":500}})",
                         200, false);
  EXPECT_TRUE(fits.json()["fits"].get<bool>()) << fits.body;
  const auto breaks = call("POST", "/v1/whatif",
                           R"({"name":"fast","model":"yolo11n","demand":{"fps":5},)"
                           R"("sla":{"latency_ms_p95":0.01}})",
                           200, false);
  EXPECT_FALSE(breaks.json()["breaks"].empty()) << breaks.body;
  call("POST", "/v1/whatif", cam0, 409, false);
  call("POST", "/v1/whatif", R"({"name":"x","model":"yolo11z","demand":{"fps":1}})", 422, false);
  call("POST", "/v1/whatif", "{", 400, false);
  call("POST", "/v1/whatif", cam0, 415, false, "text/plain");
  call("GET", "/v1/whatif", "", 405);
  // Tool placements next to the plan in force (one of both models: until it is, a placement
  // is refused with 503 no_plan), and the refusals.
  const auto covered = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < covered) {
    const auto r =
        serve::testing::raw_http(server.port(), serve::testing::request("GET", "/v1/plan"));
    if (r.status == 200 && r.json()["models"].size() == 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const std::string dag =
      R"({"name":"d","kind":"serial","vram_budget_gb":8,"tools":[{"id":"a","tool":"asr"},)"
      R"({"id":"b","tool":"summarize","after":["a"]}]})";
  const auto placed = call("POST", "/v1/tools/place", R"({"scenario":)" + dag + "}", 200, false);
  EXPECT_TRUE(placed.json().contains("corunners")) << placed.body;
  call("POST", "/v1/tools/place", R"({"scenario":)" + dag + R"(,"policy":"heft"})", 200, false);
  call("POST", "/v1/tools/place", R"({"scenario":)" + dag + R"(,"policy":"best"})", 422, false);
  call("POST", "/v1/tools/place", R"({"scenario":{"name":"d","name":"e"}})", 400, false);
  call("POST", "/v1/tools/place", "{}", 415, false, "text/plain");
  call("GET", "/v1/tools/place", "", 405);
  // Capacity answers: the registered models, a body's models, and the refusals.
  const auto capacity = call("POST", "/v1/capacity", "", 200, false);
  EXPECT_EQ(capacity.json()["gpus_needed"], 1) << capacity.body;
  call("POST", "/v1/capacity",
       R"({"models":[{"name":"cam9","model":"yolo11n","demand":{"fps":5}}],"max_gpus":2})", 200,
       false);
  call("POST", "/v1/capacity", R"({"max_gpus":0})", 400, false);
  call("POST", "/v1/capacity", R"({"models":[{"name":"x","model":"yolo11z"}]})", 422, false);
  call("GET", "/v1/capacity", "", 405);
  const std::string id = std::to_string(plan["id"].get<long long>());
  call("POST", "/v1/telemetry",
       R"({"model":"cam0","plan_id":)" + id + R"(,"latency_ms_p95":41.5,"throughput":29.8})", 202);
  call("POST", "/v1/telemetry",
       R"([{"model":"cam0","latency_ms_p95":1000},{"model":"chat","ttft_ms_p95":90}])", 202);
  call("POST", "/v1/telemetry", R"({"model":"cam0"})", 400);
  call("POST", "/v1/telemetry", R"({"model":"cam9","throughput":1})", 404);
  std::string many = "[";
  for (int i = 0; i < 257; ++i)
    many += std::string(i ? "," : "") + R"({"model":"cam0","throughput":1})";
  call("POST", "/v1/telemetry", many + "]", 413);
  call("GET", "/v1/telemetry", "", 200);
  call("GET", "/v1/plan/history?limit=2", "", 200);
  call("GET", "/v1/plan/history?limit=0", "", 400);
  call("GET", "/v1/plan/history?lim=2", "", 400);
  call("POST", "/v1/replan", "", 202);
  call("POST", "/v1/replan", R"({"now":true})", 400);
  call("DELETE", "/v1/models/chat", "", 200);
  call("DELETE", "/v1/models/chat", "", 404);
  call("DELETE", "/v1/models/cam0", "", 401, false);
  // The server's own copy of this document is this document.
  const auto spec = call("GET", "/v1/openapi.json", "", 200);
  EXPECT_EQ(spec.json(), serve::yaml_to_json(doc().root()));
  call("POST", "/v1/openapi.json", "{}", 405);
  // Every operation of the document answered with success at least once.
  for (const auto& p : doc().root()["paths"]) {
    for (const auto& op : p.second) {
      const std::string method = op.first.as<std::string>();
      if (method == "parameters") continue;
      EXPECT_TRUE(succeeded.count({method, p.first.as<std::string>()}))
          << method << " " << p.first << " never answered 2xx";
    }
  }
  EXPECT_GE(checked, 30);
}

}  // namespace
}  // namespace corun::openapi_test
