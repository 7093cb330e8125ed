// In-process tests of the serve layer: the API through a real loopback HttpServer, hostile
// input, the monitor (breach -> re-plan, margins) and recovery from the state directory.
// These run under ASan/UBSan too (asan preset).
#include "corun/serve/service.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "corun/catalog/catalog.h"
#include "corun/runtime/twin_source.h"
#include "corun/serve/server.h"
#include "serve_test_util.h"

namespace corun::serve::service_test {
namespace {

using nlohmann::json;
using testing::kCam0;
using testing::kCam1;
using testing::kChat;
using testing::raw_http;
using testing::request;
using testing::TempDir;

constexpr const char* kToken = "test-token-0123456789abcdef";

std::unique_ptr<Service> open_service(const std::filesystem::path& dir,
                                      const std::string& solver = "greedy") {
  ServiceOptions o;
  o.state_dir = dir;
  o.token = kToken;
  o.solver = solver;
  o.telemetry_flush_ms = 100;
  o.min_replan_interval_ms = 0;
  auto s = Service::open(Context{}, o, Catalog::default_catalog(), std::make_unique<TwinSource>());
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().what());
  return s.ok() ? std::move(*s) : nullptr;
}

HttpResponse call(Service& s, const std::string& method, const std::string& path,
                  const std::string& body = "", bool auth = true) {
  return testing::call_service(s, auth ? kToken : "", method, path, body);
}

json body_of(const HttpResponse& r) { return json::parse(r.body, nullptr, false); }

// One hostile or malformed request and what it must get.
struct HostileCase {
  std::string name;
  std::string raw;  // bytes sent as-is
  int status;
  std::string code;   // expected error.code ("" = not checked: answered by the transport)
  std::string field;  // expected error.field ("" = not checked)
};

std::vector<HostileCase> hostile_cases() {
  const std::string t = kToken;
  auto post = [&](const std::string& path, const std::string& body) {
    return request("POST", path, body, t);
  };
  std::string nested(2000, '[');
  nested += std::string(2000, ']');
  std::string many = "[";
  for (int i = 0; i < 300; ++i)
    many += std::string(i ? "," : "") + R"({"model":"cam0","throughput":1})";
  many += "]";
  // A model entry "x" (yolo11n) with the given members after name and model.
  auto entry = [&](const std::string& members) {
    return post("/v1/models", R"({"name":"x","model":"yolo11n",)" + members + "}");
  };
  auto put_demand = [&](const std::string& body) {
    return request("PUT", "/v1/models/cam0/demand", body, t);
  };
  // A telemetry POST whose header section ends with `extra` (which sets its own framing).
  auto with_headers = [&](const std::string& extra, const std::string& body) {
    return "POST /v1/telemetry HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer " +
           t + "\r\nContent-Type: application/json\r\n" + extra + "\r\n" + body;
  };
  // `n` header fields X-Pad-i with values of `bytes` characters.
  auto many_headers = [](int n, std::size_t bytes) {
    std::string h;
    for (int i = 0; i < n; ++i)
      h += "X-Pad-" + std::to_string(i) + ": " + std::string(bytes, 'v') + "\r\n";
    return h + "Content-Length: 2\r\n";
  };
  auto place = [&](const std::string& body) {
    return request("POST", "/v1/tools/place", body, "");
  };
  // A tool DAG scenario with the given `tools` (JSON text) and more members after them.
  auto dag = [&](const std::string& tools, const std::string& more = "") {
    return place(R"({"scenario":{"name":"d","kind":"serial","vram_budget_gb":8,"tools":)" + tools +
                 more + "}}");
  };
  std::string nine_tools = "[";
  for (int i = 0; i < 9; ++i) {
    nine_tools +=
        std::string(i ? "," : "") + R"({"id":"t)" + std::to_string(i) + R"(","tool":"ocr"})";
  }
  nine_tools += "]";
  const std::string cam0_bad_demand =
      R"({"name":"camx","model":"yolo11n","knobs":{"imgsz":[320]},"demand":{"fps":-1}})";
  return {
      {"truncated JSON", post("/v1/models", R"({"name":)"), 400, "bad_json", ""},
      {"JSON array as model", post("/v1/models", "[1,2]"), 400, "bad_type", ""},
      {"JSON string as model", post("/v1/models", "\"cam\""), 400, "bad_type", ""},
      {"empty object", post("/v1/models", "{}"), 422, "invalid_spec", "name"},
      {"name of wrong type",
       post("/v1/models", R"({"name":[1],"model":"yolo11n","demand":{"fps":1}})"), 422,
       "invalid_spec", "name"},
      {"unknown catalog model",
       post("/v1/models", R"({"name":"x","model":"yolo99","demand":{"fps":1}})"), 422,
       "invalid_spec", "model"},
      {"misspelled key",
       post("/v1/models", R"({"name":"x","model":"yolo11n","knbos":{},"demand":{"fps":1}})"), 422,
       "invalid_spec", "knbos"},
      {"negative demand", post("/v1/models", cam0_bad_demand), 422, "invalid_spec", "demand.fps"},
      {"unknown knob value",
       post("/v1/models",
            R"({"name":"x","model":"yolo11n","knobs":{"imgsz":["huge"]},"demand":{"fps":1}})"),
       422, "invalid_spec", ""},
      {"path-like model name",
       post("/v1/models", R"({"name":"../etc","model":"yolo11n","demand":{"fps":1}})"), 422,
       "invalid_spec", "name"},
      {"overlong model name",
       post("/v1/models",
            R"({"name":")" + std::string(100, 'a') + R"(","model":"yolo11n","demand":{"fps":1}})"),
       422, "invalid_spec", "name"},
      {"duplicate model", post("/v1/models", kCam0), 409, "duplicate_model", "name"},
      {"missing token", request("POST", "/v1/models", kCam1, ""), 401, "missing_token", ""},
      {"wrong token", request("POST", "/v1/models", kCam1, "not-the-token"), 401, "bad_token", ""},
      {"token prefix", request("POST", "/v1/models", kCam1, t.substr(0, t.size() - 1)), 401,
       "bad_token", ""},
      {"token with suffix", request("POST", "/v1/models", kCam1, t + "x"), 401, "bad_token", ""},
      {"basic auth",
       "POST /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Basic "
       "dXNlcjpwYXNz\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
       401, "bad_token", ""},
      {"text/plain body", request("POST", "/v1/models", kCam1, t, "text/plain"), 415,
       "unsupported_media_type", ""},
      {"no content type", request("POST", "/v1/models", kCam1, t, ""), 415,
       "unsupported_media_type", ""},
      {"empty body", request("POST", "/v1/models", "", t), 400, "empty_body", ""},
      {"1 MiB body", post("/v1/models", std::string(1 << 20, ' ')), 413, "body_too_large", ""},
      {"lying Content-Length",
       "POST /v1/telemetry HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer " + t +
           "\r\nContent-Type: application/json\r\nContent-Length: 99999999999\r\n\r\n{}",
       413, "body_too_large", ""},
      {"deeply nested JSON", post("/v1/telemetry", nested), 400, "bad_json", ""},
      {"invalid UTF-8", post("/v1/telemetry", "{\"model\":\"\xff\xfe\",\"throughput\":1}"), 400,
       "bad_json", "model"},
      {"NaN literal", post("/v1/telemetry", R"({"model":"cam0","latency_ms_p95":NaN})"), 400,
       "bad_json", "latency_ms_p95"},
      {"unknown model telemetry", post("/v1/telemetry", R"({"model":"ghost","throughput":1})"), 404,
       "unknown_model", "model"},
      {"metric of wrong type", post("/v1/telemetry", R"({"model":"cam0","latency_ms_p95":"fast"})"),
       400, "bad_type", "latency_ms_p95"},
      {"negative metric", post("/v1/telemetry", R"({"model":"cam0","latency_ms_p95":-5})"), 400,
       "out_of_range", "latency_ms_p95"},
      {"huge metric", post("/v1/telemetry", R"({"model":"cam0","latency_ms_p95":1e308})"), 400,
       "out_of_range", "latency_ms_p95"},
      {"misspelled metric", post("/v1/telemetry", R"({"model":"cam0","latncy_ms_p95":5})"), 400,
       "unknown_field", "latncy_ms_p95"},
      {"sample without model", post("/v1/telemetry", R"({"throughput":5})"), 400, "missing_field",
       "model"},
      {"sample without metric", post("/v1/telemetry", R"({"model":"cam0"})"), 400, "missing_field",
       ""},
      {"model of wrong type", post("/v1/telemetry", R"({"model":7,"throughput":5})"), 400,
       "bad_type", "model"},
      {"plan_id of wrong type",
       post("/v1/telemetry", R"({"model":"cam0","plan_id":"x","throughput":5})"), 400, "bad_type",
       "plan_id"},
      {"too many samples", post("/v1/telemetry", many), 413, "too_many_samples", ""},
      {"bad sample in a batch",
       post("/v1/telemetry",
            R"([{"model":"cam0","throughput":1},{"model":"cam0","throughput":"x"}])"),
       400, "bad_type", "[1].throughput"},
      {"demand of wrong type", request("PUT", "/v1/models/cam0/demand", R"({"fps":"fast"})", t),
       422, "invalid_spec", "demand.fps"},
      {"demand key of another family", request("PUT", "/v1/models/cam0/demand", R"({"rps":1})", t),
       422, "invalid_spec", ""},
      {"demand not an object", request("PUT", "/v1/models/cam0/demand", "[30]", t), 400, "bad_type",
       "demand"},
      {"demand of unknown model", request("PUT", "/v1/models/ghost/demand", R"({"fps":1})", t), 404,
       "unknown_model", "name"},
      {"get unknown model", request("GET", "/v1/models/ghost"), 404, "unknown_model", "name"},
      {"delete unknown model", request("DELETE", "/v1/models/ghost", "", t), 404, "unknown_model",
       "name"},
      {"delete without token", request("DELETE", "/v1/models/cam0"), 401, "missing_token", ""},
      {"dot-dot path", request("GET", "/v1/models/../healthz"), 400, "bad_path", ""},
      {"encoded dot-dot path", request("GET", "/v1/models/%2e%2e%2f%2e%2e%2fetc%2fpasswd"), 400,
       "bad_path", ""},
      {"double slash", request("GET", "/v1//models"), 400, "bad_path", ""},
      {"NUL in path", request("GET", "/v1/models/cam0%00.json"), 404, "not_found", ""},
      {"unknown route", request("GET", "/v2/models"), 404, "not_found", ""},
      {"method not allowed", request("PATCH", "/v1/models", "{}", t), 405, "method_not_allowed",
       ""},
      {"delete the plan", request("DELETE", "/v1/plan", "", t), 405, "method_not_allowed", ""},
      {"GET replan", request("GET", "/v1/replan"), 405, "method_not_allowed", ""},
      {"replan with parameters", post("/v1/replan", R"({"now":true})"), 400, "unexpected_body", ""},
      {"history limit not a number", request("GET", "/v1/plan/history?limit=abc"), 400,
       "bad_parameter", "limit"},
      {"history limit too large", request("GET", "/v1/plan/history?limit=99999999999999"), 400,
       "bad_parameter", "limit"},
      {"unknown query parameter", request("GET", "/v1/plan/history?drop=1"), 400,
       "unknown_parameter", "drop"},
      // POST /v1/whatif takes a models entry, parsed and validated as POST /v1/models does.
      {"whatif truncated JSON", post("/v1/whatif", R"({"name":"x","model":)"), 400, "bad_json", ""},
      {"whatif duplicate key",
       post("/v1/whatif", R"({"name":"x","name":"y","model":"yolo11n","demand":{"fps":1}})"), 400,
       "duplicate_key", "name"},
      {"whatif array body", post("/v1/whatif", "[1]"), 400, "bad_type", ""},
      {"whatif empty object", post("/v1/whatif", "{}"), 422, "invalid_spec", "name"},
      {"whatif name of wrong type",
       post("/v1/whatif", R"({"name":7,"model":"yolo11n","demand":{"fps":1}})"), 422,
       "invalid_spec", "name"},
      {"whatif demand of wrong type",
       post("/v1/whatif", R"({"name":"x","model":"yolo11n","demand":{"fps":"many"}})"), 422,
       "invalid_spec", "demand.fps"},
      {"whatif missing demand", post("/v1/whatif", R"({"name":"x","model":"yolo11n"})"), 422,
       "invalid_spec", "demand"},
      {"whatif unknown catalog model",
       post("/v1/whatif", R"({"name":"x","model":"yolo99","demand":{"fps":1}})"), 422,
       "invalid_spec", "model"},
      {"whatif NaN", post("/v1/whatif", R"({"name":"x","model":"yolo11n","demand":{"fps":NaN}})"),
       400, "bad_json", "demand.fps"},
      {"whatif registered name", post("/v1/whatif", kCam0), 409, "duplicate_model", "name"},
      {"whatif text/plain", request("POST", "/v1/whatif", kCam1, "", "text/plain"), 415,
       "unsupported_media_type", ""},
      {"whatif empty body", request("POST", "/v1/whatif", "", ""), 400, "empty_body", ""},
      {"GET whatif", request("GET", "/v1/whatif"), 405, "method_not_allowed", ""},
      // POST /v1/tools/place takes {"scenario": a tool DAG scenario, "policy": name}; errors
      // name the field inside the scenario as a scenario file's would.
      {"place array body", place("[1]"), 400, "bad_type", ""},
      {"place missing scenario", place("{}"), 422, "invalid_spec", "scenario"},
      {"place misspelled key", place(R"({"scenaro":{}})"), 422, "invalid_spec", "scenaro"},
      {"place scenario of wrong type", place(R"({"scenario":[1]})"), 422, "invalid_spec",
       "scenario"},
      {"place policy of wrong type", place(R"({"scenario":{},"policy":7})"), 422, "invalid_spec",
       "policy"},
      {"place unknown policy", place(R"({"scenario":{},"policy":"fastest"})"), 422, "invalid_spec",
       "policy"},
      {"place unknown tool", dag(R"([{"id":"a","tool":"teleport"}])"), 422, "invalid_spec",
       "scenario.tools[0].tool"},
      {"place tool of wrong type", dag(R"([{"id":"a","tool":7}])"), 422, "invalid_spec",
       "scenario.tools[0].tool"},
      {"place dependency of wrong type deep down",
       dag(R"([{"id":"a","tool":"asr"},{"id":"b","tool":"ocr","after":[["a"]]}])"), 422,
       "invalid_spec", "scenario.tools[1].after[0]"},
      {"place unknown dependency",
       dag(R"([{"id":"a","tool":"asr"},{"id":"b","tool":"ocr","after":["z"]}])"), 422,
       "invalid_spec", "scenario.tools[1].after[0]"},
      {"place cyclic DAG",
       dag(R"([{"id":"a","tool":"asr","after":["b"]},{"id":"b","tool":"ocr","after":["a"]}])"), 422,
       "invalid_spec", "scenario.tools[0].after"},
      {"place duplicate id", dag(R"([{"id":"a","tool":"asr"},{"id":"a","tool":"ocr"}])"), 422,
       "invalid_spec", "scenario.tools[1].id"},
      {"place too many tools", dag(nine_tools), 422, "too_many_tools", "scenario.tools"},
      {"place tools of wrong type", dag(R"({"a":"asr"})"), 422, "invalid_spec", "scenario.tools"},
      {"place co-runners named", dag("[]", R"(,"co_running":{"plan":"/etc/passwd"})"), 422,
       "invalid_spec", "scenario.co_running"},
      {"place GPU background", dag("[]", R"(,"background":{"gpu_sm_util":0.5})"), 422,
       "invalid_spec", "scenario.background"},
      {"place another device", dag(R"([{"id":"a","tool":"asr"}])", R"(,"device":"a100")"), 422,
       "invalid_spec", "scenario.device"},
      {"place budget overflows a double",
       place(R"({"scenario":{"name":"d","kind":"serial","vram_budget_gb":1e999,"tools":[]}})"), 400,
       "bad_number", "scenario.vram_budget_gb"},
      {"place negative budget",
       place(R"({"scenario":{"name":"d","kind":"serial","vram_budget_gb":-1,"tools":[]}})"), 422,
       "invalid_spec", "scenario.vram_budget_gb"},
      {"place seed beyond 2^53", dag("[]", R"(,"seed":9007199254740993)"), 400, "bad_number",
       "scenario.seed"},
      {"place duplicate key", place(R"({"scenario":{"name":"d","name":"e"}})"), 400,
       "duplicate_key", "scenario.name"},
      {"place NaN", dag("[]", R"(,"seed":NaN)"), 400, "bad_json", ""},
      {"place text/plain", request("POST", "/v1/tools/place", "{}", "", "text/plain"), 415,
       "unsupported_media_type", ""},
      {"GET tools/place", request("GET", "/v1/tools/place"), 405, "method_not_allowed", ""},
      {"garbage request line", "HELLO\r\n\r\n", 400, "", ""},

      // Numbers JSON cannot carry faithfully (RFC 8259 §6: no NaN or Infinity in the grammar;
      // integers are interoperable only within ±(2^53 - 1); IEEE-754 doubles end near 1.8e308).
      {"fps overflows a double", entry(R"("demand":{"fps":1e999})"), 400, "bad_number",
       "demand.fps"},
      {"weight overflows negatively", entry(R"("demand":{"fps":1},"weight":-1e999)"), 400,
       "bad_number", "weight"},
      {"metric overflows a double", post("/v1/telemetry", R"({"model":"cam0","throughput":1E400})"),
       400, "bad_number", "throughput"},
      {"demand overflows a double", put_demand(R"({"fps":1e999})"), 400, "bad_number",
       "demand.fps"},
      {"Infinity literal", post("/v1/telemetry", R"({"model":"cam0","throughput":Infinity})"), 400,
       "bad_json", "throughput"},
      {"-Infinity literal", entry(R"("demand":{"fps":-Infinity})"), 400, "bad_json", "demand.fps"},
      {"NaN in an entry", entry(R"("demand":{"fps":NaN})"), 400, "bad_json", "demand.fps"},
      {"integer 2^53",
       post("/v1/telemetry", R"({"model":"cam0","plan_id":9007199254740992,)"
                             R"("throughput":1})"),
       400, "bad_number", "plan_id"},
      {"integer -2^53",
       post("/v1/telemetry", R"({"model":"cam0","plan_id":-9007199254740992,)"
                             R"("throughput":1})"),
       400, "bad_number", "plan_id"},
      {"integer beyond 64 bits", entry(R"("demand":{"fps":99999999999999999999})"), 400,
       "bad_number", "demand.fps"},
      {"integer 2^64 in a list",
       entry(R"("knobs":{"imgsz":[320,18446744073709551616]},)"
             R"("demand":{"fps":1})"),
       400, "bad_number", "knobs.imgsz[1]"},
      {"number underflowing to zero",
       entry(R"("demand":{"fps":1},"sla":{"latency_ms_p95":1e-400})"), 422, "invalid_spec",
       "sla.latency_ms_p95"},

      // Text that is not UTF-8, or not Unicode (RFC 8259 §8.1, §8.2).
      {"invalid UTF-8 in a key", entry("\"demand\":{\"fps\":1},\"sla\":{\"n\xc3\":1}"), 400,
       "bad_json", "sla"},
      {"overlong UTF-8 '/'", entry("\"demand\":{\"fps\":1},\"weight\":\"\xc0\xaf\""), 400,
       "bad_json", "weight"},
      {"UTF-8 truncated at the end", post("/v1/telemetry", "{\"model\":\"cam\xe2\x82"), 400,
       "bad_json", "model"},
      {"lone surrogate escape", post("/v1/telemetry", R"({"model":"\ud800","throughput":1})"), 400,
       "bad_json", "model"},
      {"UTF-16 body", post("/v1/telemetry", std::string("{\0\"\0m\0\"\0:\0\"\0", 12)), 400,
       "bad_json", ""},

      // Duplicate keys: RFC 8259 §4 leaves their meaning to the implementation; refused.
      {"duplicate name",
       post("/v1/models", R"({"name":"a","name":"b","model":"yolo11n",)"
                          R"("demand":{"fps":1}})"),
       400, "duplicate_key", "name"},
      {"duplicate demand key", entry(R"("demand":{"fps":1,"fps":2})"), 400, "duplicate_key",
       "demand.fps"},
      {"duplicate knob", entry(R"("knobs":{"imgsz":[320],"imgsz":[640]},"demand":{"fps":1})"), 400,
       "duplicate_key", "knobs.imgsz"},
      {"duplicate key in a batch sample",
       post("/v1/telemetry", R"([{"model":"cam0","throughput":1},)"
                             R"({"model":"cam0","throughput":1,"throughput":2}])"),
       400, "duplicate_key", "[1].throughput"},
      {"duplicate demand update", put_demand(R"({"fps":10,"fps":20})"), 400, "duplicate_key",
       "demand.fps"},
      {"duplicate key in replan", post("/v1/replan", R"({"a":1,"a":1})"), 400, "duplicate_key",
       "a"},

      // Wrong types at every depth of a model entry (the entry's JSON types reach the spec
      // parser: a quoted "30" is a string there too).
      {"fps as a string", entry(R"("demand":{"fps":"30"})"), 422, "invalid_spec", "demand.fps"},
      {"fps as a boolean", entry(R"("demand":{"fps":true})"), 422, "invalid_spec", "demand.fps"},
      {"fps as a list", entry(R"("demand":{"fps":[30]})"), 422, "invalid_spec", "demand.fps"},
      {"fps null", entry(R"("demand":{"fps":null})"), 422, "invalid_spec", "demand.fps"},
      {"demand as a list", entry(R"("demand":[30])"), 422, "invalid_spec", "demand"},
      {"name as a number", post("/v1/models", R"({"name":7,"model":"yolo11n","demand":{"fps":1}})"),
       422, "invalid_spec", "name"},
      {"model as a boolean", post("/v1/models", R"({"name":"x","model":true,"demand":{"fps":1}})"),
       422, "invalid_spec", "model"},
      {"knob value as a string", entry(R"("knobs":{"imgsz":["320"]},"demand":{"fps":1})"), 422,
       "invalid_spec", "knobs.imgsz[0]"},
      {"knob value as a list", entry(R"("knobs":{"imgsz":[[320]]},"demand":{"fps":1})"), 422,
       "invalid_spec", "knobs.imgsz[0]"},
      {"knobs as a list", entry(R"("knobs":[320],"demand":{"fps":1})"), 422, "invalid_spec",
       "knobs"},
      {"precision as a number", entry(R"("knobs":{"precision":[16]},"demand":{"fps":1})"), 422,
       "invalid_spec", "knobs.precision[0]"},
      {"SLA bound as an object", entry(R"("demand":{"fps":1},"sla":{"latency_ms_p95":{"x":1}})"),
       422, "invalid_spec", "sla.latency_ms_p95"},
      {"SLA as a string", entry(R"("demand":{"fps":1},"sla":"fast")"), 422, "invalid_spec", "sla"},
      {"weight as a string", entry(R"("demand":{"fps":1},"weight":"2")"), 422, "invalid_spec",
       "weight"},
      {"active as a string", entry(R"("demand":{"fps":1},"active":"true")"), 422, "invalid_spec",
       "active"},
      {"active as a number", entry(R"("demand":{"fps":1},"active":1)"), 422, "invalid_spec",
       "active"},
      {"demand update as a string", put_demand(R"({"fps":"60"})"), 422, "invalid_spec",
       "demand.fps"},
      {"demand update nested", put_demand(R"({"fps":{"value":60}})"), 422, "invalid_spec",
       "demand.fps"},
      {"metric as a boolean", post("/v1/telemetry", R"({"model":"cam0","throughput":true})"), 400,
       "bad_type", "throughput"},
      {"metric null", post("/v1/telemetry", R"({"model":"cam0","throughput":null})"), 400,
       "bad_type", "throughput"},
      {"plan_id fractional",
       post("/v1/telemetry", R"({"model":"cam0","plan_id":1.5,"throughput":1})"), 400, "bad_type",
       "plan_id"},
      {"sample as a list", post("/v1/telemetry", R"([["cam0",1]])"), 400, "bad_type", "[0]"},
      {"telemetry as a number", post("/v1/telemetry", "5"), 400, "bad_type", ""},
      {"replan with a list", post("/v1/replan", "[]"), 400, "unexpected_body", ""},

      // Strings a YAML reader would misread if they were passed on unquoted.
      {"emoji name",
       post("/v1/models", R"({"name":"\ud83d\ude00","model":"yolo11n",)"
                          R"("demand":{"fps":1}})"),
       422, "invalid_spec", "name"},
      {"control character in a name",
       post("/v1/models", R"({"name":"a\u0001b","model":"yolo11n","demand":{"fps":1}})"), 422,
       "invalid_spec", "name"},
      {"line break and YAML in a name",
       post("/v1/models", R"({"name":"x\nmodels:\n  - name: y","model":"yolo11n",)"
                          R"("demand":{"fps":1}})"),
       422, "invalid_spec", "name"},
      {"quote breaking out of a name",
       post("/v1/models", R"({"name":"a\"}, {\"b","model":"yolo11n","demand":{"fps":1}})"), 422,
       "invalid_spec", "name"},
      {"YAML alias as a model",
       post("/v1/models", R"({"name":"x","model":"*a","demand":{"fps":1}})"), 422, "invalid_spec",
       "model"},
      {"YAML indicator key", entry(R"("demand":{"fps":1},"? a":1)"), 422, "invalid_spec", "? a"},
      {"key of 2000 bytes", entry(R"("demand":{"fps":1},")" + std::string(2000, 'k') + R"(":1)"),
       400, "bad_json", ""},

      // Framing (RFC 9110 §8.6: Content-Length = 1*DIGIT; RFC 9112 §6.3: invalid or conflicting
      // lengths are unrecoverable, 400) and header limits (RFC 6585 §5: 431).
      {"negative Content-Length", with_headers("Content-Length: -1\r\n", "{}"), 400, "bad_request",
       "Content-Length"},
      {"20-digit Content-Length", with_headers("Content-Length: 99999999999999999999\r\n", "{}"),
       400, "bad_request", "Content-Length"},
      {"Content-Length in exponent form", with_headers("Content-Length: 2e0\r\n", "{}"), 400,
       "bad_request", "Content-Length"},
      {"signed Content-Length", with_headers("Content-Length: +2\r\n", "{}"), 400, "bad_request",
       "Content-Length"},
      {"conflicting Content-Lengths",
       with_headers("Content-Length: 2\r\nContent-Length: 3\r\n", "{}"), 400, "bad_request",
       "Content-Length"},
      {"negative Content-Length on a GET",
       "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: -5\r\n\r\n", 400,
       "bad_request", "Content-Length"},
      {"101 header fields", with_headers(many_headers(96, 8), "{}"), 431, "headers_too_large", ""},
      {"10,000 header fields", with_headers(many_headers(10000, 8), "{}"), 431, "headers_too_large",
       ""},
      {"17 KiB of headers in 5 fields", with_headers(many_headers(5, 3500), "{}"), 431,
       "headers_too_large", ""},
      {"unknown HTTP version", "GET /healthz HTTP/9.9\r\nHost: x\r\nConnection: close\r\n\r\n", 400,
       "", ""},

      // Clients that stop half-way: the connection gate (server.h) answers them without a
      // worker thread once the request deadline passes, or at once when the header section
      // outgrows what could ever be accepted.
      {"body shorter than its Content-Length", with_headers("Content-Length: 10\r\n", "{}"), 408,
       "request_timeout", ""},
      {"header section that never ends", "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: a", 408,
       "request_timeout", ""},
      {"30 KiB header line without an end",
       "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: " + std::string(30 * 1024, 'v'), 431,
       "headers_too_large", ""},
      {"chunked body without its last chunk",
       with_headers("Transfer-Encoding: chunked\r\n", "2\r\n{}\r\n"), 408, "request_timeout", ""},
  };
}

class ServeHttpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    service_ = open_service(dir_.path());
    ASSERT_NE(service_, nullptr);
    ServerOptions so;
    so.port = 0;
    so.threads = 4;
    so.read_timeout_s = 1;
    so.request_timeout_s = 1;  // the cases that stop half-way wait for this
    server_ = std::make_unique<HttpServer>(*service_, so);
    ASSERT_TRUE(server_->start().ok());
    ASSERT_GT(server_->port(), 0);
    const auto r = raw_http(server_->port(), request("POST", "/v1/models", kCam0, kToken));
    ASSERT_EQ(r.status, 201) << r.body;
  }
  void TearDown() override {
    if (server_) server_->stop();
    if (service_) service_->stop();
  }
  TempDir dir_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<HttpServer> server_;
};

TEST_F(ServeHttpTest, HostileRequestsGetTheRight4xxAndLeaveTheServerHealthy) {
  const auto cases = hostile_cases();
  ASSERT_GE(cases.size(), 80U);
  const int port = server_->port();
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const auto r = raw_http(port, c.raw);
    EXPECT_EQ(r.status, c.status) << r.head << "\n" << r.body;
    const json j = r.json();
    ASSERT_TRUE(j.is_object() && j.contains("error")) << r.body;
    EXPECT_FALSE(j["error"].value("message", "").empty());
    if (!c.code.empty()) {
      EXPECT_EQ(j["error"].value("code", ""), c.code) << r.body;
    }
    if (!c.field.empty()) {
      EXPECT_EQ(j["error"].value("field", ""), c.field) << r.body;
    }
    // Still healthy, and the state is exactly what it was: one model, cam0.
    const auto h = raw_http(port, request("GET", "/healthz"));
    ASSERT_EQ(h.status, 200) << "after " << c.name;
    const auto m = raw_http(port, request("GET", "/v1/models")).json();
    ASSERT_EQ(m["models"].size(), 1U) << m.dump();
    EXPECT_EQ(m["models"][0]["name"], "cam0");
    EXPECT_EQ(m["models"][0]["demand"]["fps"], 30);
  }
  // Hostile traffic was counted, and the metrics page still renders.
  const auto metrics = raw_http(port, request("GET", "/metrics"));
  ASSERT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find("corun_serve_requests_total{route=\"telemetry\",code=\"400\"}"),
            std::string::npos);
  EXPECT_NE(metrics.body.find("corun_serve_requests_total{route=\"models\",code=\"401\"}"),
            std::string::npos);
}

TEST_F(ServeHttpTest, LimitsHoldExactlyAtTheirBoundaries) {
  const int port = server_->port();
  // 100 header fields pass, 101 do not (Host and Connection count).
  auto get_with_fields = [&](int fields) {
    std::string r = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n";
    for (int i = 2; i < fields; ++i) r += "X-Pad-" + std::to_string(i) + ": v\r\n";
    return raw_http(port, r + "\r\n");
  };
  EXPECT_EQ(get_with_fields(100).status, 200);
  EXPECT_EQ(get_with_fields(101).status, 431);
  // 16 KiB of header fields pass, one byte more does not. Each field is "name: value\r\n".
  auto get_with_bytes = [&](std::size_t bytes) {
    const std::string base = "Host: x\r\nConnection: close\r\n";
    std::string r = "GET /healthz HTTP/1.1\r\n" + base;
    std::size_t left = bytes - base.size();
    for (int i = 0; left > 0; ++i) {
      const std::string name = "X-Pad-" + std::to_string(i);
      const std::size_t value = std::min<std::size_t>(4000, left - name.size() - 4);
      r += name + ": " + std::string(value, 'v') + "\r\n";
      left -= name.size() + 4 + value;
    }
    return raw_http(port, r + "\r\n");
  };
  EXPECT_EQ(get_with_bytes(16384).status, 200);
  EXPECT_EQ(get_with_bytes(16385).status, 431);
  // The last integer a JSON number keeps exactly is accepted, the next one is not.
  const auto ok = raw_http(
      port, request("POST", "/v1/telemetry",
                    R"({"model":"cam0","plan_id":9007199254740991,"throughput":1})", kToken));
  EXPECT_EQ(ok.status, 202) << ok.body;
  const auto next = raw_http(
      port, request("POST", "/v1/telemetry",
                    R"({"model":"cam0","plan_id":9007199254740992,"throughput":1})", kToken));
  EXPECT_EQ(next.status, 400) << next.body;
  // A 128-byte key reaches validation (an unknown field), a 129-byte key does not.
  auto entry_with_key = [&](std::size_t bytes) {
    return raw_http(port, request("POST", "/v1/models",
                                  R"({"name":"x","model":"yolo11n","demand":{"fps":1},")" +
                                      std::string(bytes, 'k') + R"(":1})",
                                  kToken));
  };
  const auto key128 = entry_with_key(128);
  EXPECT_EQ(key128.status, 422) << key128.body;
  EXPECT_EQ(key128.json()["error"]["field"], std::string(128, 'k'));
  EXPECT_EQ(entry_with_key(129).status, 400);
  // The same key in two samples of a batch is no duplicate.
  const auto batch =
      raw_http(port, request("POST", "/v1/telemetry",
                             R"([{"model":"cam0","throughput":1},{"model":"cam0","throughput":2}])",
                             kToken));
  EXPECT_EQ(batch.status, 202) << batch.body;
  EXPECT_EQ(batch.json()["accepted"], 2);
  // A framing error leaves the body unread: the answer tells the client to close.
  const auto framing = raw_http(port,
                                "POST /v1/telemetry HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n"
                                "Content-Type: application/json\r\n\r\n{}");
  EXPECT_EQ(framing.status, 400);
  EXPECT_NE(framing.head.find("Connection: close"), std::string::npos) << framing.head;
  EXPECT_EQ(raw_http(port, request("GET", "/healthz")).status, 200);
}

TEST_F(ServeHttpTest, SpecErrorsNameTheFieldAndSuggestTheNearestKey) {
  const auto r = raw_http(
      server_->port(),
      request("POST", "/v1/models", R"({"name":"x","model":"yolo11n","demnd":{"fps":1}})", kToken));
  ASSERT_EQ(r.status, 422);
  const std::string msg = r.json()["error"]["message"];
  EXPECT_NE(msg.find("demnd"), std::string::npos) << msg;
  EXPECT_NE(msg.find("demand"), std::string::npos) << msg;  // "did you mean 'demand'"
}

TEST(ServeService, RegistersPlansReactsToBreachesAndRecovers) {
  TempDir dir;
  json plan_before_restart;
  json models_before_restart;
  {
    auto s = open_service(dir.path());
    ASSERT_NE(s, nullptr);
    for (const char* m : {kCam0, kCam1, kChat}) {
      const auto r = call(*s, "POST", "/v1/models", m);
      ASSERT_EQ(r.status, 201) << r.body;
    }
    // Registrations coalesce into re-plans; wait until one covers all three models.
    json plan;
    for (int i = 0; i < 200; ++i) {
      ASSERT_TRUE(s->wait_for_plan(s->plan_id() - 1, 10000));
      plan = body_of(call(*s, "GET", "/v1/plan"));
      if (plan["models"].size() == 3) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ASSERT_EQ(plan["models"].size(), 3U) << plan.dump();
    // A registration's re-plan may still be queued behind the one that covered all three: let
    // the planner go idle, so that the next decision is the breach's.
    ASSERT_TRUE(testing::settle(*s, kToken));
    plan = body_of(call(*s, "GET", "/v1/plan"));
    EXPECT_TRUE(plan["feasible"].get<bool>()) << plan.dump();
    const std::int64_t id = plan["id"];

    // Observed latency twice the SLA under the plan in force: a breach, a re-plan, and a higher
    // planned bound (prediction x (1 + margin)) for the configuration observed.
    const std::int64_t decided = s->decision();
    const auto t =
        call(*s, "POST", "/v1/telemetry",
             json({{"model", "cam1"}, {"plan_id", id}, {"latency_ms_p95", 160.0}}).dump());
    ASSERT_EQ(t.status, 202) << t.body;
    EXPECT_EQ(body_of(t)["breaches"], 1);
    ASSERT_TRUE(s->wait_for_decision(decided, 30000));
    const json after = body_of(call(*s, "GET", "/v1/plan"));
    EXPECT_EQ(after["reason"], "breach cam1");
    const json tel = body_of(call(*s, "GET", "/v1/telemetry"));
    EXPECT_EQ(tel["models"]["cam1"]["breaches"], 1);
    EXPECT_GT(tel["models"]["cam1"]["learning"]["abs_error"].get<double>(), 0.0);
    EXPECT_GT(tel["models"]["cam1"]["learning"]["prediction_error"].get<double>(), 0.5);
    // The learned correction: cam1 is now predicted slower than before in any configuration.
    EXPECT_GT(after["learning"]["cam1"]["shared_error"].get<double>(), 0.3);

    // A sample for an older plan is stale: it teaches nothing (no re-plan, no learning), but the
    // SLA it broke was broken, and the ledger counts it. (The re-plan after the breach may have
    // kept the plan, and its id with it: the sample names the id before the one in force.)
    const std::int64_t in_force = s->plan_id();
    const auto stale = call(
        *s, "POST", "/v1/telemetry",
        json({{"model", "cam1"}, {"plan_id", in_force - 1}, {"latency_ms_p95", 500.0}}).dump());
    EXPECT_EQ(body_of(stale)["breaches"], 1);
    EXPECT_FALSE(s->wait_for_plan(in_force, 300));
    EXPECT_FALSE(s->wait_for_decision(s->decision(), 300));
    const json tel_after = body_of(call(*s, "GET", "/v1/telemetry"));
    EXPECT_EQ(tel_after["models"]["cam1"]["stale"], 1);
    EXPECT_EQ(tel_after["models"]["cam1"]["learning"]["observations"], 1);

    const auto metrics = call(*s, "GET", "/metrics");
    EXPECT_NE(metrics.body.find("corun_serve_sla_breaches_total{model=\"cam1\"} 2"),
              std::string::npos)
        << metrics.body;
    EXPECT_NE(metrics.body.find("corun_serve_decision_latency_seconds_count"), std::string::npos);
    plan_before_restart = after;
    models_before_restart = body_of(call(*s, "GET", "/v1/models"));
  }
  // A new process on the same state: same models, same plan, the telemetry summary kept.
  auto s = open_service(dir.path());
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(body_of(call(*s, "GET", "/v1/models")), models_before_restart);
  EXPECT_EQ(body_of(call(*s, "GET", "/v1/plan")), plan_before_restart);
  EXPECT_EQ(body_of(call(*s, "GET", "/v1/telemetry"))["models"]["cam1"]["breaches"], 2);
  const json history = body_of(call(*s, "GET", "/v1/plan/history"));
  json decided = plan_before_restart;
  decided.erase("learning");  // live state: the history keeps the plans as decided
  decided.erase("catalog");   // the catalog the service runs with, not part of the decision
  EXPECT_EQ(history["plans"].back(), decided);

  // Removing a model re-plans without it.
  const std::int64_t id = s->plan_id();
  ASSERT_EQ(call(*s, "DELETE", "/v1/models/chat").status, 200);
  ASSERT_TRUE(s->wait_for_plan(id, 30000));
  const json p = body_of(call(*s, "GET", "/v1/plan"));
  EXPECT_FALSE(p["models"].contains("chat")) << p.dump();
  EXPECT_EQ(p["models"].size(), 2U);
}

TEST(ServeService, DemandUpdatesAreValidatedStoredAndReplanned) {
  TempDir dir;
  auto s = open_service(dir.path());
  ASSERT_NE(s, nullptr);
  ASSERT_EQ(call(*s, "POST", "/v1/models", kCam0).status, 201);
  ASSERT_TRUE(s->wait_for_plan(0, 30000));
  const std::int64_t decided = s->decision();
  const auto r = call(*s, "PUT", "/v1/models/cam0/demand", R"({"fps":60})");
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_TRUE(s->wait_for_decision(decided, 30000));
  EXPECT_EQ(body_of(call(*s, "GET", "/v1/plan"))["reason"], "demand cam0");
  s.reset();
  auto again = open_service(dir.path());
  EXPECT_EQ(body_of(call(*again, "GET", "/v1/models/cam0"))["model"]["demand"]["fps"], 60);
}

TEST(ServeService, RefusesMutationsWithoutTheToken) {
  TempDir dir;
  auto s = open_service(dir.path());
  ASSERT_NE(s, nullptr);
  const auto r = call(*s, "POST", "/v1/models", kCam0, /*auth=*/false);
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(body_of(call(*s, "GET", "/v1/models"))["models"].size(), 0U);
  EXPECT_EQ(call(*s, "GET", "/v1/plan").status, 404);
}

}  // namespace
}  // namespace corun::serve::service_test
