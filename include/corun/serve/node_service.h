#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "corun/core/context.h"
#include "corun/catalog/catalog.h"
#include "corun/core/mutex.h"
#include "corun/core/result.h"
#include "corun/runtime/predictor_source.h"
#include "corun/serve/http.h"
#include "corun/serve/router.h"
#include "corun/serve/service.h"

namespace corun::serve {

/// @brief `corun serve` on a node of several whole GPUs: one Service per GPU — its own state
/// directory (STATE/gpuK), model set, online controller, planner thread and learning, as a GPU
/// is planned and learned on its own — behind one API of the same shape (docs/serve.md,
/// "A node"). The node answers where a model goes: a registration or a what-if without a
/// `gpu` pin asks every GPU's what-if (in parallel) and takes the GPU that holds every SLA with
/// the largest predicted utility gain (the least loss when none holds them; lower index on a
/// tie); with `gpu: K`, GPU K. Model-scoped requests and telemetry go to the model's GPU; plans,
/// models, telemetry, health and metrics are the GPUs' answers joined, each model with its
/// `gpu`. Validation, authentication and durability are each GPU service's own.
/// Thread-safety: handle() may be called from many threads at once.
class NodeService final : public HttpHandler {
 public:
  /// Makes the predictor source of one GPU's service (each GPU learns its own).
  using SourceFactory = std::function<Result<std::unique_ptr<PredictorSource>>()>;

  /// @brief Opens the node state in `options.state_dir`, creating it with `gpus` GPUs of
  /// `options.device` when new. `initial[k]` (when present and not empty) is the workload file
  /// GPU k's service starts a new state with (serve ignores it for a state that has one). A
  /// state made for another GPU count is refused.
  static Result<std::unique_ptr<NodeService>> open(const Context& ctx, const ServiceOptions& options,
                                                   std::size_t gpus,
                                                   const std::vector<std::string>& initial,
                                                   const Catalog& catalog,
                                                   const SourceFactory& source);
  /// @brief The GPU count of the node state in `state_dir`; nullopt when it holds none.
  static Result<std::optional<std::size_t>> stored_gpus(const std::filesystem::path& state_dir);
  /// @brief The state directory of GPU `k` inside a node state.
  static std::filesystem::path unit_dir(const std::filesystem::path& state_dir, std::size_t k);

  ~NodeService() override;
  NodeService(const NodeService&) = delete;
  NodeService& operator=(const NodeService&) = delete;

  HttpResponse handle(const HttpRequest& req) override;
  HttpResponse transport_error(int status, const std::string& path, const std::string& reason,
                               const std::string& field) override;

  /// @brief The node's own handling of a row of Service::routes(), named by its method and
  /// pattern. A request resolves against Service::routes() (one table: what a GPU answers, the
  /// node answers); a row listed here runs the node's handler, any other row goes to the GPU of
  /// the model its {name} names (GPU 0 for an unknown one, which answers 404), and a request no
  /// row matches goes to GPU 0, which answers it as every GPU would (404, 405, the OpenAPI
  /// document).
  struct NodeRoute {
    std::string_view method;
    std::string_view pattern;
    HttpResponse (NodeService::*handler)(const RouteCall&);
  };
  static std::span<const NodeRoute> node_routes();

  [[nodiscard]] std::size_t gpus() const { return units_.size(); }
  /// @brief GPU k's service.
  [[nodiscard]] Service& unit(std::size_t k) { return *units_.at(k); }
  /// @brief Stops every GPU's planner and flushes telemetry (also done by the destructor).
  void stop();

 private:
  explicit NodeService(std::vector<std::unique_ptr<Service>> units);
  HttpResponse route(const HttpRequest& req);
  HttpResponse forward(std::size_t k, const HttpRequest& req) { return units_[k]->handle(req); }

  // The GPU each what-if answer prefers, and the answers; an error response when one failed.
  struct Placement {
    std::size_t gpu = 0;
    std::vector<nlohmann::json> answers;  // per GPU: its POST /v1/whatif answer
  };
  std::variant<Placement, HttpResponse> place(const HttpRequest& req, const nlohmann::json& entry,
                                              std::optional<std::size_t> pin);
  // A models entry of a request body: the JSON without its `gpu` pin, the pin and the name
  // ("" when it has none: the GPU's validation names that).
  struct Entry {
    nlohmann::json body;
    std::optional<std::size_t> pin;
    std::string name;
  };
  std::variant<Entry, HttpResponse> read_entry(const HttpRequest& req) const;
  // The body's `gpu` pin, removed from the entry; an error response when it is not a GPU.
  std::variant<std::optional<std::size_t>, HttpResponse> take_pin(nlohmann::json& entry) const;
  std::optional<std::size_t> gpu_of(const std::string& model) const;

  HttpResponse register_model(const RouteCall& call);
  HttpResponse whatif(const RouteCall& call);
  HttpResponse capacity(const RouteCall& call);
  HttpResponse post_telemetry(const RouteCall& call);
  HttpResponse list_models(const RouteCall& call);
  HttpResponse get_telemetry(const RouteCall& call);
  HttpResponse get_plan(const RouteCall& call);
  HttpResponse get_history(const RouteCall& call);
  HttpResponse replan(const RouteCall& call);
  HttpResponse tools_place(const RouteCall& call);
  HttpResponse health(const RouteCall& call);
  HttpResponse metrics(const RouteCall& call);
  HttpResponse remove_model(const RouteCall& call);

  std::vector<std::unique_ptr<Service>> units_;
  /// Serialises registrations and removals: a name is unique across the GPUs, and a placement
  /// is decided on the model sets it registers into.
  Mutex mutate_mutex_;
  mutable Mutex where_mutex_ CORUN_ACQUIRED_AFTER(mutate_mutex_);
  std::map<std::string, std::size_t> where_ CORUN_GUARDED_BY(where_mutex_);  ///< model -> GPU
};

}  // namespace corun::serve
