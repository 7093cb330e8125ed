#include "corun/serve/kube.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "corun/core/atomic_file.h"
#include "corun/core/strings.h"

namespace corun::serve {

using nlohmann::json;

namespace {

void set_timeouts(httplib::Client& c, int connect_ms, int read_ms) {
  c.set_connection_timeout(connect_ms / 1000, (connect_ms % 1000) * 1000);
  c.set_read_timeout(read_ms / 1000, (read_ms % 1000) * 1000);
  c.set_write_timeout(connect_ms / 1000, (connect_ms % 1000) * 1000);
}

KubeAnswer answer_of(const httplib::Result& res, const std::string& url) {
  KubeAnswer a;
  if (!res) {
    a.error = "the API server at " + url + " did not answer (" + httplib::to_string(res.error()) +
              ")";
    return a;
  }
  a.status = res->status;
  a.body = json::parse(res->body, nullptr, false);
  if (a.body.is_discarded()) a.body = json();
  return a;
}

std::string str(const json& j, const char* key) {
  if (!j.is_object()) return {};
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

const json& obj(const json& j, const char* key) {
  static const json kNull;
  if (!j.is_object()) return kNull;
  const auto it = j.find(key);
  return it != j.end() ? *it : kNull;
}

}  // namespace

std::string KubeAnswer::describe() const {
  if (status == 0) return error;
  std::string out = "HTTP " + std::to_string(status);
  const std::string message = str(body, "message");
  const std::string reason = str(body, "reason");
  if (!reason.empty()) out += " " + reason;
  if (!message.empty()) out += ": " + message;
  return out;
}

Result<KubeConfig> in_cluster_config(const std::string& sa_dir) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (host == nullptr || port == nullptr || *host == '\0' || *port == '\0') {
    return Error(
        "not in a Kubernetes pod: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not "
        "set (outside a cluster, give --kube-api URL and --kube-token-file FILE)",
        Error::Kind::kInvalidInput);
  }
  KubeConfig c;
  const std::string h = host;
  c.url = "https://" + (h.find(':') != std::string::npos ? "[" + h + "]" : h) + ":" + port;
  c.token_file = sa_dir + "/token";
  c.ca_file = sa_dir + "/ca.crt";
  return c;
}

Result<KubeClient> KubeClient::create(KubeConfig config) {
  const std::string& url = config.url;
  const bool https = url.rfind("https://", 0) == 0;
  if (!https && url.rfind("http://", 0) != 0) {
    return Error("--kube-api " + url + ": expected http(s)://HOST[:PORT]",
                 Error::Kind::kInvalidInput);
  }
  const std::string rest = url.substr(https ? 8 : 7);
  if (rest.empty() || rest.front() == ':' || rest.front() == '/' ||
      rest.find('/') != std::string::npos) {
    return Error("--kube-api " + url + ": expected http(s)://HOST[:PORT] without a path",
                 Error::Kind::kInvalidInput);
  }
  if (!config.token_file.empty()) {
    const auto text = read_file(config.token_file);
    if (!text) {
      return Error("--kube-token-file " + config.token_file + ": cannot be read",
                   Error::Kind::kInvalidInput);
    }
    if (trim(*text).empty()) {
      return Error("--kube-token-file " + config.token_file + ": the file is empty",
                   Error::Kind::kInvalidInput);
    }
  }
  if (!config.ca_file.empty() && !std::ifstream(config.ca_file)) {
    return Error("--kube-ca-file " + config.ca_file + ": cannot be read",
                 Error::Kind::kInvalidInput);
  }
  if (config.timeout_ms < 1) {
    return Error("the API server time-out must be at least 1 ms", Error::Kind::kInvalidInput);
  }
  return KubeClient(std::move(config));
}

std::string KubeClient::token() const {
  if (config_.token_file.empty()) return {};
  const auto text = read_file(config_.token_file);
  return text ? std::string(trim(*text)) : std::string();
}

namespace {

std::unique_ptr<httplib::Client> make_client(const KubeConfig& c) {
  auto client = std::make_unique<httplib::Client>(c.url);
  if (!c.ca_file.empty()) client->set_ca_cert_path(c.ca_file);
  client->enable_server_certificate_verification(true);
  return client;
}

httplib::Headers headers_with(const std::string& token) {
  httplib::Headers h{{"Accept", "application/json"}};
  if (!token.empty()) h.emplace("Authorization", "Bearer " + token);
  return h;
}

}  // namespace

KubeAnswer KubeClient::get(const std::string& path) const {
  auto client = make_client(config_);
  set_timeouts(*client, config_.timeout_ms, config_.timeout_ms);
  return answer_of(client->Get(path, headers_with(token())), config_.url);
}

KubeAnswer KubeClient::post(const std::string& path, const json& body) const {
  auto client = make_client(config_);
  set_timeouts(*client, config_.timeout_ms, config_.timeout_ms);
  return answer_of(client->Post(path, headers_with(token()),
                                body.dump(-1, ' ', true, json::error_handler_t::replace),
                                "application/json"),
                   config_.url);
}

struct KubeClient::Watch::Impl {
  std::mutex mutex;
  httplib::Client* client = nullptr;  // the request in progress
};

KubeClient::Watch::Watch() : impl_(std::make_unique<Impl>()) {}
KubeClient::Watch::~Watch() = default;

void KubeClient::Watch::cancel() {
  cancelled_.store(true);
  std::lock_guard<std::mutex> lock(impl_->mutex);
  // Shuts the socket of a request in flight down: its read returns at once.
  if (impl_->client != nullptr) impl_->client->stop();
}

KubeAnswer KubeClient::watch(const std::string& path, Watch& watch,
                             const std::function<bool(const json&)>& on_event,
                             int silence_s) const {
  auto client = make_client(config_);
  // Reading nothing for silence_s: the connection died without a word (a node or a proxy
  // gone); the caller watches again.
  set_timeouts(*client, config_.timeout_ms, std::max(1, silence_s) * 1000);
  {
    std::lock_guard<std::mutex> lock(watch.impl_->mutex);
    if (watch.cancelled()) return KubeAnswer{0, json(), "cancelled"};
    watch.impl_->client = client.get();
  }
  std::string pending;
  bool stopped_by_handler = false;
  int status = 0;
  auto res = client->Get(
      path, headers_with(token()),
      [&](const httplib::Response& r) {
        status = r.status;
        return true;
      },
      [&](const char* data, std::size_t n) {
        if (status != 200) {
          pending.append(data, n);  // an error's Status body
          return true;
        }
        pending.append(data, n);
        std::size_t start = 0;
        for (std::size_t nl = pending.find('\n'); nl != std::string::npos;
             nl = pending.find('\n', start)) {
          const std::string line = pending.substr(start, nl - start);
          start = nl + 1;
          if (line.find_first_not_of(" \r\t") == std::string::npos) continue;
          const json event = json::parse(line, nullptr, false);
          if (event.is_discarded() || !event.is_object()) continue;
          if (!on_event(event)) {
            stopped_by_handler = true;
            return false;
          }
        }
        pending.erase(0, start);
        return !watch.cancelled();
      });
  {
    std::lock_guard<std::mutex> lock(watch.impl_->mutex);
    watch.impl_->client = nullptr;
  }
  KubeAnswer a;
  if (stopped_by_handler || (res && status == 200)) {
    a.status = 200;
    return a;
  }
  if (!res && status == 0) {
    a.error = watch.cancelled() ? "cancelled"
                                : "the API server at " + config_.url + " did not answer (" +
                                      httplib::to_string(res.error()) + ")";
    return a;
  }
  a.status = res ? res->status : status;
  a.body = json::parse(pending, nullptr, false);
  if (a.body.is_discarded()) a.body = json();
  return a;
}

std::string kube_query(const std::string& key, const std::string& value) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out = key + "=";
  for (const unsigned char c : value) {
    if (std::isalnum(c) != 0 || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Informer

KubeInformer::KubeInformer(KubeClient client, KubeInformerOptions options, EventHandler on_event,
                           std::function<void()> on_synced)
    : client_(std::move(client)),
      options_(std::move(options)),
      on_event_(std::move(on_event)),
      on_synced_(std::move(on_synced)) {}

KubeInformer::~KubeInformer() { stop(); }

void KubeInformer::start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { loop(); });
}

void KubeInformer::stop() {
  {
    MutexLock lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (!thread_.joinable()) return;
  // A cancel that lands before the watch's socket is open finds nothing to shut down: repeat
  // it until the thread has left the watch.
  while (!done_.load()) {
    watch_.cancel();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  thread_.join();
}

std::map<std::string, json> KubeInformer::objects() const {
  MutexLock lock(mutex_);
  return objects_;
}

std::string KubeInformer::last_error() const {
  MutexLock lock(mutex_);
  return last_error_;
}

std::string KubeInformer::key(const json& object) {
  const json& meta = obj(object, "metadata");
  const std::string ns = str(meta, "namespace");
  return ns.empty() ? str(meta, "name") : ns + "/" + str(meta, "name");
}

void KubeInformer::fail(const std::string& what) {
  std::fprintf(stderr, "corun: kubernetes %s: %s\n", options_.path.c_str(), what.c_str());
  std::fflush(stderr);
  MutexLock lock(mutex_);
  last_error_ = what;
}

bool KubeInformer::wait_retry() {
  backoff_ms_ = backoff_ms_ == 0 ? options_.retry_ms : std::min(2 * backoff_ms_, options_.max_retry_ms);
  MutexLock lock(mutex_);
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(backoff_ms_);
  while (!stopping_ && std::chrono::steady_clock::now() < until) cv_.wait_until(lock, until);
  return !stopping_;
}

std::optional<std::string> KubeInformer::relist() {
  const KubeAnswer a = client_.get(options_.path);
  if (!a.ok() || !a.body.is_object() || !obj(a.body, "items").is_array()) {
    fail("list: " + (a.ok() ? std::string("an answer that is not a list") : a.describe()));
    return std::nullopt;
  }
  std::map<std::string, json> fresh;
  for (const json& item : a.body["items"]) fresh[key(item)] = item;
  std::vector<KubeEvent> changes;
  {
    MutexLock lock(mutex_);
    for (const auto& [k, o] : objects_) {
      if (fresh.count(k) == 0) changes.push_back({KubeEvent::Type::kDeleted, o});
    }
    for (const auto& [k, o] : fresh) {
      const auto it = objects_.find(k);
      if (it == objects_.end()) {
        changes.push_back({KubeEvent::Type::kAdded, o});
      } else if (str(obj(it->second, "metadata"), "resourceVersion") !=
                 str(obj(o, "metadata"), "resourceVersion")) {
        changes.push_back({KubeEvent::Type::kModified, o});
      }
    }
    objects_ = std::move(fresh);
    last_error_.clear();
  }
  for (const auto& e : changes) on_event_(e);
  synced_.store(true);
  if (on_synced_) on_synced_();
  return str(obj(a.body, "metadata"), "resourceVersion");
}

void KubeInformer::loop() {
  const auto stopping = [this] {
    MutexLock lock(mutex_);
    return stopping_;
  };
  while (!stopping()) {
    auto rv = relist();
    if (!rv) {
      if (!wait_retry()) break;
      continue;
    }
    backoff_ms_ = 0;
    bool relist_now = false;
    while (!relist_now && !stopping()) {
      const std::string path =
          options_.path + (options_.path.find('?') == std::string::npos ? "?" : "&") +
          "watch=true&allowWatchBookmarks=true&" + kube_query("resourceVersion", *rv) +
          "&timeoutSeconds=" + std::to_string(options_.watch_timeout_s);
      std::string stream_error;
      // The server ends the stream at timeoutSeconds: silence well past it is a dead connection.
      const int silence_s = options_.watch_timeout_s + options_.silence_margin_s;
      const KubeAnswer a = client_.watch(path, watch_, [&](const json& event) {
        const std::string type = str(event, "type");
        const json& o = obj(event, "object");
        if (type == "ERROR") {
          // 410 Gone: the resourceVersion was compacted away; list again.
          const json& code = obj(o, "code");
          if (code.is_number_integer() && code.get<int>() == 410) {
            relist_now = true;
          } else {
            stream_error = "watch error: " + str(o, "message");
          }
          return false;
        }
        const std::string version = str(obj(o, "metadata"), "resourceVersion");
        if (!version.empty()) *rv = version;
        if (type == "BOOKMARK") return true;
        KubeEvent e;
        if (type == "ADDED") {
          e.type = KubeEvent::Type::kAdded;
        } else if (type == "MODIFIED") {
          e.type = KubeEvent::Type::kModified;
        } else if (type == "DELETED") {
          e.type = KubeEvent::Type::kDeleted;
        } else {
          return true;  // a type this client does not know
        }
        e.object = o;
        {
          MutexLock lock(mutex_);
          if (e.type == KubeEvent::Type::kDeleted) {
            objects_.erase(key(o));
          } else {
            objects_[key(o)] = o;
          }
        }
        on_event_(e);
        return true;
      }, silence_s);
      if (watch_.cancelled()) break;
      if (relist_now) break;
      if (!stream_error.empty() || !a.ok()) {
        fail(stream_error.empty() ? "watch: " + a.describe() : stream_error);
        if (a.status == 410) break;
        if (!wait_retry()) break;
        continue;
      }
      backoff_ms_ = 0;  // the server ended the stream (timeoutSeconds): watch again
    }
  }
  done_.store(true);
}

PodInfo read_pod(const json& pod) {
  PodInfo p;
  const json& meta = obj(pod, "metadata");
  const json& spec = obj(pod, "spec");
  const json& status = obj(pod, "status");
  p.ns = str(meta, "namespace");
  p.name = str(meta, "name");
  p.uid = str(meta, "uid");
  p.deleting = !obj(meta, "deletionTimestamp").is_null();
  const json& annotations = obj(meta, "annotations");
  if (annotations.is_object()) {
    for (const auto& [k, v] : annotations.items()) {
      if (v.is_string()) p.annotations[k] = v.get<std::string>();
    }
  }
  p.node = str(spec, "nodeName");
  p.scheduler = str(spec, "schedulerName");
  p.phase = str(status, "phase");
  p.host_ip = str(status, "hostIP");
  p.pod_ip = str(status, "podIP");
  return p;
}

}  // namespace corun::serve
