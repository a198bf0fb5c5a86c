#include "frontends/http/kserve_routes.h"

#include <spdlog/spdlog.h>

#include <string_view>

#include "core/server_info.h"
#include "frontends/http/dashboard_page.h"
#include "frontends/http/http_responses.h"
#include "frontends/http/kserve_codec.h"
#include "frontends/http/kserve_json.h"
#include "frontends/http/lifecycle_codec.h"

namespace inferd {
namespace {

// "/v2/models/M[/versions/V][/ACTION]" parsed.
struct ModelTarget {
  std::string name;
  int64_t version = 0;
  std::string action;  // "", "ready", "infer", "config", "stats", "feedback", "quality", ...
};

StatusOr<ModelTarget> ParseModelTarget(const std::vector<std::string_view>& parts) {
  // parts[0] == "v2", parts[1] == "models"
  ModelTarget target{.name = std::string(parts[2])};
  size_t next = 3;
  if (parts.size() > next && parts[next] == "versions") {
    if (parts.size() <= next + 1) return Status::NotFound("missing version after /versions");
    ASSIGN_OR_RETURN(target.version, ParseModelVersion(parts[next + 1]));
    next += 2;
  }
  if (parts.size() > next) target.action = std::string(parts[next++]);
  if (parts.size() > next) return Status::NotFound("unknown path");
  return target;
}

class KServeRoutes {
 public:
  explicit KServeRoutes(InferenceServer* server) : server_(server) {}

  void Handle(HttpRequest request, Responder respond) {
    auto parts = SplitPath(request.path);
    if (parts.empty() || parts[0] != "v2") return respond(Error(404, "unknown path " + request.path));
    if (parts.size() == 1) {
      if (request.method != HttpMethod::kGet) return respond(MethodNotAllowed("GET"));
      return respond(Json(200, ServerMetadataJson()));
    }
    if (parts[1] == "health" && parts.size() == 3) return respond(Health(request, parts[2]));
    if (parts[1] == "alerts" && parts.size() == 2) {
      if (request.method != HttpMethod::kGet) return respond(MethodNotAllowed("GET"));
      return respond(Json(200, AlertsJson(server_->ActiveAlerts(), server_->ActiveDriftAlerts())));
    }
    if (parts[1] == "models" && parts.size() == 3 && parts[2] == "stats") {
      if (request.method != HttpMethod::kGet) return respond(MethodNotAllowed("GET"));
      return respond(Json(200, ModelStatsJson(server_->LoadedModels())));
    }
    if (parts[1] == "models" && parts.size() >= 3)
      return HandleModel(std::move(request), parts, std::move(respond));
    if (parts[1] == "repository") return HandleRepository(request, parts, std::move(respond));
    if (parts[1] == "systemsharedmemory") return respond(HandleSharedMemory(request, parts));
    respond(Error(404, "unknown path " + request.path));
  }

 private:
  HttpResponse Health(const HttpRequest& request, std::string_view which) {
    if (request.method != HttpMethod::kGet) return MethodNotAllowed("GET");
    if (which == "live") return Json(200, "{\"live\":true}");
    if (which == "ready") {
      bool ready = server_->IsReady();
      return Json(ready ? 200 : 503, ready ? "{\"ready\":true}" : "{\"ready\":false}");
    }
    return Error(404, "unknown path " + request.path);
  }

  void HandleModel(HttpRequest request, const std::vector<std::string_view>& parts, Responder respond) {
    auto target = ParseModelTarget(parts);
    if (!target.ok()) return respond(Error(target.status()));
    const std::string& action = target->action;
    if (action == "traffic" || action == "rollout") {
      if (target->version != 0) return respond(Error(404, "unknown path " + request.path + " (no version in it)"));
      return respond(action == "traffic" ? Traffic(request, target->name) : Rollout(request, target->name));
    }
    if (action == "feedback" || action == "quality") return respond(Quality(request, *target));
    if (action == "drift") {
      if (request.method != HttpMethod::kGet) return respond(MethodNotAllowed("GET"));
      auto reports = server_->DriftReports(target->name, target->version);
      return respond(reports.ok() ? Json(200, DriftJson(target->name, *reports)) : Error(reports.status()));
    }
    const bool post = action == "infer";
    if (action != "" && action != "ready" && action != "infer" && action != "config" && action != "stats") {
      return respond(Error(404, "unknown path " + request.path));
    }
    if (post && request.method != HttpMethod::kPost) return respond(MethodNotAllowed("POST"));
    if (!post && request.method != HttpMethod::kGet) return respond(MethodNotAllowed("GET"));
    if (action == "infer") return Infer(std::move(request), *target, std::move(respond));
    if (action == "ready") return respond(ModelReady(*target));
    auto model = server_->FindModel(target->name, target->version);
    if (!model.ok()) return respond(Error(model.status()));
    if (action == "config") return respond(Json(200, ModelConfigToJson(model->config())));
    std::vector<ModelView> loaded = server_->LoadedVersions(target->name);
    if (action == "stats") {
      if (target->version != 0) loaded = {*model};
      return respond(Json(200, ModelStatsJson(loaded)));
    }
    std::vector<int64_t> versions;
    for (const ModelView& version : loaded) versions.push_back(version.version());
    respond(Json(200, ModelMetadataJson(*model, versions)));
  }

  static std::string_view Body(const HttpRequest& request) {
    return request.body ? std::string_view(*request.body) : std::string_view();
  }

  // GET: the split and labels in force. POST {"split": ..., "labels": ...}: changes them.
  HttpResponse Traffic(const HttpRequest& request, const std::string& model) {
    if (request.method == HttpMethod::kPost) {
      auto change = ParseTrafficRequest(Body(request));
      if (!change.ok()) return Error(change.status());
      if (Status status = server_->SetTraffic(model, std::move(change->split), std::move(change->labels)); !status.ok())
        return Error(status);
    } else if (request.method != HttpMethod::kGet) {
      return MethodNotAllowed("GET, POST");
    }
    auto traffic = server_->Traffic(model);
    if (!traffic.ok()) return Error(traffic.status());
    return Json(200, TrafficJson(model, *traffic));
  }

  // GET: the rollout's state. POST a plan: starts it; POST {"action": "rollback"}: rolls back.
  HttpResponse Rollout(const HttpRequest& request, const std::string& model) {
    if (request.method != HttpMethod::kPost && request.method != HttpMethod::kGet) return MethodNotAllowed("GET, POST");
    auto status = [&]() -> StatusOr<RolloutStatus> {
      if (request.method == HttpMethod::kGet) return server_->Rollout(model);
      ASSIGN_OR_RETURN(RolloutRequest parsed, ParseRolloutRequest(Body(request)));
      return parsed.rollback ? server_->RollbackRollout(model) : server_->StartRollout(model, parsed.plan);
    }();
    if (!status.ok()) return Error(status.status());
    return Json(200, RolloutJson(*status));
  }

  // POST .../feedback: ground truth for past requests. GET .../quality: what it added up to.
  HttpResponse Quality(const HttpRequest& request, const ModelTarget& target) {
    if (target.action == "quality") {
      if (request.method != HttpMethod::kGet) return MethodNotAllowed("GET");
      auto reports = server_->QualityReports(target.name, target.version);
      if (!reports.ok()) return Error(reports.status());
      return Json(200, QualityJson(target.name, *reports));
    }
    if (request.method != HttpMethod::kPost) return MethodNotAllowed("POST");
    auto items = ParseFeedbackRequest(Body(request));
    if (!items.ok()) return Error(items.status());
    auto outcomes = server_->AddFeedback(target.name, target.version, *items);
    if (!outcomes.ok()) return Error(outcomes.status());
    return Json(200, FeedbackResultJson(*items, *outcomes));
  }

  // Ready: 200. Known and not ready: 503 with the reason. Unknown: 404.
  HttpResponse ModelReady(const ModelTarget& target) {
    const ModelReadiness readiness = server_->ModelStateOf(target.name, target.version);
    switch (readiness.state) {
      case ModelState::kReady:
        return Json(200, ReadyJson(target.name, true, ""));
      case ModelState::kUnavailable:
      case ModelState::kNotLoaded:
        return Json(503, ReadyJson(target.name, false, readiness.reason));
      case ModelState::kUnknown:
        break;
    }
    return Error(Status::NotFound(readiness.reason));
  }

  void Infer(HttpRequest request, const ModelTarget& target, Responder respond) {
    auto parsed = ParseInferRequest(request.body, request.inference_header_length);
    if (!parsed.ok()) {
      spdlog::debug("rejected request to {}: {}", request.path, parsed.status().message());
      return respond(Error(parsed.status()));
    }
    parsed->request->model_name = target.name;
    parsed->request->model_version = target.version;
    OutputEncoding encoding = std::move(parsed->encoding);
    server_->InferAsync(
        std::move(parsed->request),
        [respond = std::move(respond), encoding = std::move(encoding)](StatusOr<InferResponse> result) {
          if (!result.ok()) {
            spdlog::debug("inference failed: {}", result.status().ToString());
            return respond(Error(result.status()));
          }
          EncodedResponse encoded = EncodeInferResponse(*result, encoding);
          HttpResponse response = Json(200, std::move(encoded.body));
          if (encoded.json_length) {
            response.content_type = "application/octet-stream";
            response.headers.emplace_back("Inference-Header-Content-Length",
                                          std::to_string(*encoded.json_length));
          }
          respond(std::move(response));
        });
  }

  void HandleRepository(const HttpRequest& request, const std::vector<std::string_view>& parts,
                        Responder respond) {
    if (parts.size() == 3 && parts[2] == "index") {
      if (request.method != HttpMethod::kPost) return respond(MethodNotAllowed("POST"));
      return respond(Json(200, RepositoryIndexJson(server_->RepositoryIndex())));
    }
    if (parts.size() == 5 && parts[2] == "models" && (parts[4] == "load" || parts[4] == "unload")) {
      if (request.method != HttpMethod::kPost) return respond(MethodNotAllowed("POST"));
      StatusOr<LoadOverride> override = LoadOverride{};
      if (parts[4] == "load") {
        override = ParseLoadRequest(request.body ? std::string_view(*request.body) : std::string_view());
        if (!override.ok()) return respond(Error(override.status()));
      }
      auto done = [respond = std::move(respond)](Status status) {
        respond(status.ok() ? Json(200, "{}") : Error(status));
      };
      std::string name(parts[3]);
      if (parts[4] == "unload") return server_->UnloadModelAsync(std::move(name), std::move(done));
      server_->LoadModelAsync(std::move(name), std::move(override).value(), std::move(done));
      return;
    }
    respond(Error(404, "unknown path " + request.path));
  }

  // /v2/systemsharedmemory[/region/R]/status, .../region/R/register, [.../region/R]/unregister.
  HttpResponse HandleSharedMemory(const HttpRequest& request, const std::vector<std::string_view>& parts) {
    std::string_view region, action;
    if (parts.size() == 3) {
      action = parts[2];
    } else if (parts.size() == 5 && parts[2] == "region") {
      region = parts[3];
      action = parts[4];
    } else {
      return Error(404, "unknown path " + request.path);
    }
    SharedMemoryRegistry& registry = server_->shared_memory();
    if (action == "status") {
      if (request.method != HttpMethod::kGet) return MethodNotAllowed("GET");
      auto regions = registry.Regions(region);
      return regions.ok() ? Json(200, SharedMemoryStatusJson(*regions)) : Error(regions.status());
    }
    if (action != "register" && action != "unregister") return Error(404, "unknown path " + request.path);
    if (request.method != HttpMethod::kPost) return MethodNotAllowed("POST");
    if (action == "unregister") {
      Status status = registry.Unregister(region);
      return status.ok() ? Json(200, "{}") : Error(status);
    }
    if (region.empty()) return Error(404, "register needs /v2/systemsharedmemory/region/NAME/register");
    auto registration = ParseSharedMemoryRegistration(Body(request));
    if (!registration.ok()) return Error(registration.status());
    Status status = registry.Register(std::string(region), registration->key, registration->offset, registration->byte_size);
    return status.ok() ? Json(200, "{}") : Error(status);
  }

  InferenceServer* server_;
};

}  // namespace

HttpHandler MakeKServeHandler(InferenceServer* server) {
  auto routes = std::make_shared<KServeRoutes>(server);
  return [routes](HttpRequest request, Responder respond) {
    routes->Handle(std::move(request), std::move(respond));
  };
}

HttpHandler MakeMetricsHandler(InferenceServer* server) {
  return [server](HttpRequest request, Responder respond) {
    const bool known = request.path == "/metrics" || request.path == "/dashboard" || request.path == "/dashboard/status";
    if (!known) return respond(Error(404, "unknown path " + request.path + "; try /metrics or /dashboard"));
    if (request.method != HttpMethod::kGet) return respond(MethodNotAllowed("GET"));
    if (request.path == "/dashboard") return respond({200, "text/html; charset=utf-8", std::string(DashboardPage()), {}});
    if (request.path == "/dashboard/status") {
      // What the page shows besides /metrics: every model's state (as the repository index says
      // it) and the active alerts.
      return respond(Json(200, "{\"models\":" + RepositoryIndexJson(server->RepositoryIndex()) + ",\"alerts\":" +
                                   AlertsJson(server->ActiveAlerts(), server->ActiveDriftAlerts()) + "}"));
    }
    respond({200, "text/plain; version=0.0.4; charset=utf-8", server->metrics().RenderText(), {}});
  };
}

}  // namespace inferd
