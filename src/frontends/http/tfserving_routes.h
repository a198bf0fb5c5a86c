// Routes TensorFlow Serving REST requests (/v1/models/...) to the InferenceServer: predict in the
// row and columnar formats, model status, metadata, version labels. The bodies are
// tfserving_codec's.
#pragma once

#include "core/inference_server.h"
#include "frontends/http/http_server.h"

namespace inferd {

HttpHandler MakeTfServingHandler(InferenceServer* server);
// One HTTP port for both APIs: /v1/... goes to TF Serving, everything else to KServe.
HttpHandler RouteByApi(HttpHandler kserve, HttpHandler tfserving);

}  // namespace inferd
