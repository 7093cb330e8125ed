// corun extender: a kube-scheduler extender over the `corun serve` of each GPU node (README,
// "Kubernetes").
#include <signal.h>

#include <cstdio>

#include "command.h"
#include "common.h"
#include "corun/core/atomic_file.h"
#include "corun/core/strings.h"
#include "corun/serve/extender.h"
#include "corun/serve/server.h"

namespace corun::cli::cmd_extender {
namespace {

// The flags of corun extender.
struct Flags {
  std::vector<std::string> nodes;
  std::string host = "127.0.0.1", port_file;
  int port = 8888, threads = kDefaultHttpThreads;
  serve::ExtenderOptions options;
  bool kube_discovery = false;
  KubeFlags kube;
  serve::KubeDiscoveryOptions discovery;
  std::string serve_token_file;
};

/// Whether the node table comes from the Kubernetes API (--kube or --kube-api) rather than --node.
bool discovers_nodes(const Flags& f) { return f.kube_discovery || !f.kube.api.empty(); }

/// Fills the extender's node table from --node and its serve token from --serve-token-file; an
/// error when the node table is given both ways, or neither.
Status read_node_table(Flags& f) {
  for (const auto& n : f.nodes) {
    const auto eq = n.find('=');
    if (eq == std::string::npos) return Error("--node '" + n + "': expected NAME=URL");
    f.options.nodes.push_back({n.substr(0, eq), n.substr(eq + 1)});
  }
  const bool discover = discovers_nodes(f);
  if (discover && !f.nodes.empty()) {
    return Error(
        "--node and --kube exclude each other: the node table comes from the flags or "
        "from the cluster",
        Error::Kind::kInvalidInput);
  }
  if (!discover && f.nodes.empty()) {
    return Error(
        "give the nodes: --node NAME=URL (repeat per node), or --kube to find them "
        "through the Kubernetes API",
        Error::Kind::kInvalidInput);
  }
  if (!f.serve_token_file.empty()) {
    auto token = read_file(f.serve_token_file);
    if (!token) return token.error().wrap("--serve-token-file");
    f.options.serve_token = trim(*token);
    if (f.options.serve_token.empty()) {
      return Error("--serve-token-file " + f.serve_token_file + ": the file is empty",
                   Error::Kind::kInvalidInput);
    }
  }
  return {};
}

/// Serves the extender protocol until SIGINT or SIGTERM.
int run_extender(Flags& f) {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  if (auto st = read_node_table(f); !st.ok()) return report_error(st.error());
  std::optional<serve::KubeClient> kube;
  if (discovers_nodes(f)) {
    auto client = f.kube.client();
    if (!client) return report_error(client.error().wrap("--kube"));
    kube = std::move(*client);
  }
  auto extender = serve::Extender::make(f.options, kube);
  if (!extender) return report_error(extender.error());
  std::unique_ptr<serve::KubeNodeDiscovery> discovery;
  if (kube) {
    discovery = std::make_unique<serve::KubeNodeDiscovery>(**extender, *kube, f.discovery);
    discovery->start();
  }
  serve::ServerOptions http;
  http.host = f.host;
  http.port = f.port;
  http.threads = f.threads;
  http.max_body_bytes = f.options.max_body_bytes;
  serve::HttpServer server(**extender, http);
  if (auto ok = start_server(server, f.port_file); !ok) return report_error(ok.error());
  if (kube) {
    std::fprintf(stderr,
                 "corun extender: listening on http://%s:%d (nodes from the Kubernetes API "
                 "at %s)\n",
                 f.host.c_str(), server.port(), kube->config().url.c_str());
  } else {
    std::fprintf(stderr, "corun extender: listening on http://%s:%d (%zu nodes)\n", f.host.c_str(),
                 server.port(), f.options.nodes.size());
  }
  std::fflush(stderr);
  int sig = 0;
  sigwait(&stop_signals, &sig);
  std::fprintf(stderr, "corun extender: stopping (signal %d)\n", sig);
  if (discovery) discovery->stop();
  server.stop();
  return kExitOk;
}

const bool registered = register_command({
    "extender",
    "Serve the kube-scheduler extender protocol (/filter, /prioritize) over the nodes' corun "
    "serve what-ifs",
    [](CLI::App& sub) {
      auto f = std::make_shared<Flags>();
      sub.add_option("--node", f->nodes,
                     "NAME=URL: a Kubernetes node and its corun serve (http://HOST:PORT); repeat "
                     "per node (or find them with --kube)");
      sub.add_flag("--kube", f->kube_discovery,
                   "find the nodes and their corun serve through the Kubernetes API (the serve "
                   "DaemonSet's Running pods), follow them as they come and go, and enable the "
                   "bind verb");
      f->kube.add(sub);
      sub.add_option("--kube-namespace", f->discovery.serve_namespace,
                     "namespace of the corun serve DaemonSet")
          ->capture_default_str();
      sub.add_option("--kube-serve-selector", f->discovery.serve_selector,
                     "label selector of the corun serve pods")
          ->capture_default_str();
      sub.add_option("--kube-serve-port", f->discovery.serve_port,
                     "port of corun serve when its container has no port named http")
          ->check(CLI::Range(1, 65535))
          ->capture_default_str();
      sub.add_flag("--kube-use-pod-ip", f->discovery.use_pod_ip,
                   "reach corun serve at its pod's IP and containerPort, not the node's IP and "
                   "hostPort");
      sub.add_option("--serve-token-file", f->serve_token_file,
                     "file holding the nodes' corun serve token (the Secret corun-token): the "
                     "bind verb registers the pod's model with it");
      add_listen_flags(sub, f->host, f->port, f->port_file);
      add_threads_flag(sub, f->threads, "the HTTP server's workers", 2);
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
      return std::function<int()>([f] { return run_extender(*f); });
    },
});

}  // namespace
}  // namespace corun::cli::cmd_extender
