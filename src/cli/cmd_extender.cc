// corun extender: a kube-scheduler extender over the `corun serve` of each GPU node (README,
// "Kubernetes").
#include <signal.h>

#include <cstdio>

#include "command.h"
#include "common.h"
#include "corun/serve/extender.h"
#include "corun/serve/server.h"

namespace corun::cli {
namespace {

const bool registered = register_command({
    "extender",
    "Serve the kube-scheduler extender protocol (/filter, /prioritize) over the nodes' corun "
    "serve what-ifs",
    [](CLI::App& sub) {
      struct Flags {
        std::vector<std::string> nodes;
        std::string host = "127.0.0.1", port_file;
        int port = 8888, threads = 8;
        serve::ExtenderOptions options;
      };
      auto f = std::make_shared<Flags>();
      sub.add_option("--node", f->nodes,
                     "NAME=URL: a Kubernetes node and its corun serve (http://HOST:PORT); repeat "
                     "per node")
          ->required();
      add_listen_flags(sub, f->host, f->port, f->port_file);
      sub.add_option("--threads", f->threads, "HTTP worker threads")
          ->check(CLI::Range(2, 256))
          ->capture_default_str();
      sub.add_option("--node-timeout-ms", f->options.node_timeout_ms,
                     "time a node has to answer its what-if before it counts as unreachable")
          ->check(CLI::Range(1, 600000))
          ->capture_default_str();
      sub.add_option("--node-connect-timeout-ms", f->options.node_connect_timeout_ms,
                     "time a node has to accept the connection")
          ->check(CLI::Range(1, 600000))
          ->capture_default_str();
      sub.add_option("--rank", f->options.ranking,
                     "how /prioritize ranks the nodes that fit: gain (predicted utility gain) or "
                     "pack (nodes whose GPU already runs models first, then by gain)")
          ->transform(CLI::CheckedTransformer(
              std::map<std::string, serve::ExtenderOptions::Ranking>{
                  {"gain", serve::ExtenderOptions::Ranking::kGain},
                  {"pack", serve::ExtenderOptions::Ranking::kPack}},
              CLI::ignore_case))
          ->default_str("gain");
      sub.add_option("--max-body", f->options.max_body_bytes, "largest ExtenderArgs body, bytes")
          ->check(CLI::Range(1024, 256 * 1024 * 1024))
          ->capture_default_str();
      return std::function<int()>([f] {
        sigset_t stop_signals;
        sigemptyset(&stop_signals);
        sigaddset(&stop_signals, SIGINT);
        sigaddset(&stop_signals, SIGTERM);
        pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
        signal(SIGPIPE, SIG_IGN);

        for (const auto& n : f->nodes) {
          const auto eq = n.find('=');
          if (eq == std::string::npos) {
            return report_error(Error("--node '" + n + "': expected NAME=URL"));
          }
          f->options.nodes.push_back({n.substr(0, eq), n.substr(eq + 1)});
        }
        auto extender = serve::Extender::make(f->options);
        if (!extender) return report_error(extender.error());
        serve::ServerOptions http;
        http.host = f->host;
        http.port = f->port;
        http.threads = f->threads;
        http.max_body_bytes = f->options.max_body_bytes;
        serve::HttpServer server(**extender, http);
        if (auto ok = start_server(server, f->port_file); !ok) return report_error(ok.error());
        std::fprintf(stderr, "corun extender: listening on http://%s:%d (%zu nodes)\n",
                     f->host.c_str(), server.port(), f->options.nodes.size());
        std::fflush(stderr);
        int sig = 0;
        sigwait(&stop_signals, &sig);
        std::fprintf(stderr, "corun extender: stopping (signal %d)\n", sig);
        server.stop();
        return kExitOk;
      });
    },
});

}  // namespace
}  // namespace corun::cli
