// Admission: a model the plan admits only in part (admitted share < 1, docs/scheduler.md, "When
// nothing is feasible") must see only that share of its demand. The plan cannot enforce it on
// the server (vLLM and Triton serve whatever arrives), so the export puts a rate limit in front
// of it: an NGINX gateway, one server block per such model, with ngx_http_limit_req_module
// (nginx.org/en/docs/http/ngx_http_limit_req_module.html: `limit_req_zone key zone=name:size
// rate=rate` with rate in r/s or r/m, `limit_req zone=name burst=number nodelay`,
// `limit_req_status code`). The file goes in NGINX's http context (/etc/nginx/conf.d/).

#include <algorithm>
#include <cmath>
#include <string>

#include "corun/core/strings.h"
#include "render.h"

namespace corun::exporting {
namespace {

// The address the gateway forwards to: the compose service (which listens on 8000 inside its
// container; Triton models are all in the service "triton") or the server's host port.
std::string upstream(const ModelDeployment& d, bool compose) {
  if (!compose) return "127.0.0.1:" + std::to_string(d.port);
  return (d.server == Server::kVllm ? d.spec->name : std::string("triton")) + ":8000";
}

// Requests per minute the gateway lets through: the admitted share of the planned input rate
// (requests/s for LLMs, encoders and speech; frames/s after the skip for vision), at least 1
// (NGINX takes an integer rate; r/m keeps a fractional r/s).
long long admitted_per_minute(const ModelDeployment& d) {
  return std::max(1LL, std::llround(d.admitted * d.input_rate_per_s * 60.0));
}

std::string server_block(const ModelDeployment& d, bool compose) {
  const std::string name = d.spec->name;
  const std::string to = "http://" + upstream(d, compose);
  const std::string zone = "corun_" + name;
  // The requests a client may send at once above the rate without a refusal: the requests the
  // server runs at once (vLLM's --max-num-seqs, a Triton batch).
  const int burst =
      std::max(1, d.server == Server::kVllm ? d.settings.request_concurrency : d.settings.batch);
  // vLLM serves one model per server: everything is the model's. Triton serves every model
  // of the GPU: only this model's inference paths are limited.
  const std::string limited = d.server == Server::kVllm ? "/v1/" : "/v2/models/" + name + "/";
  std::string out = "\n# " + model_line(d) + ": admitted share " + format_number(d.admitted) +
                    " of " + format_number(d.input_rate_per_s) + " requests/s\n";
  if (d.admitted > 0) {
    out += "limit_req_zone $server_port zone=" + zone +
           ":1m rate=" + std::to_string(admitted_per_minute(d)) + "r/m;\n";
  }
  out += "server {\n  listen " + std::to_string(d.gateway_port) + ";\n";
  out += "  location " + limited + " {\n";
  if (d.admitted > 0) {
    out += "    limit_req zone=" + zone + " burst=" + std::to_string(burst) +
           " nodelay;\n    limit_req_status 429;\n    proxy_pass " + to + ";\n";
  } else {
    out += "    return 503;  # paused: the plan admits none of its demand\n";
  }
  out += "  }\n  location / {\n    proxy_pass " + to + ";\n  }\n}\n";
  return out;
}

}  // namespace

std::string admission_conf(const PlanInput& plan, const std::vector<ModelDeployment>& models,
                           const ExportOptions& options, bool compose,
                           std::optional<Server> server) {
  std::string blocks;
  for (const auto& d : models) {
    if (d.admitted >= 1 || (server && d.server != *server)) continue;
    blocks += server_block(d, compose);
  }
  if (blocks.empty()) return "";
  return file_header(
             plan, options,
             "Admission gateway (NGINX, http context: /etc/nginx/conf.d/): the models the plan\n"
             "# admits only in part, each behind its own port, rate-limited to its admitted "
             "share\n# (ngx_http_limit_req_module). Requests above it get 429; a paused model "
             "gets 503.\n# Send the model's traffic to the gateway port instead of the "
             "server's.") +
         blocks;
}

}  // namespace corun::exporting
