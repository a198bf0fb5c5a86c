// Routes KServe v2 REST requests to the InferenceServer. Parsing and encoding live in
// kserve_codec / kserve_json; this file only matches paths and methods and wires callbacks.
#pragma once

#include "core/inference_server.h"
#include "frontends/http/http_server.h"

namespace inferd {

HttpHandler MakeKServeHandler(InferenceServer* server);
// Serves GET /metrics from the server's registry (for the metrics port).
HttpHandler MakeMetricsHandler(InferenceServer* server);

}  // namespace inferd
