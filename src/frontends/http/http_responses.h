// Response and path helpers shared by the REST routes (KServe v2, TF Serving).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "frontends/http/http_server.h"
#include "frontends/http/kserve_codec.h"
#include "frontends/http/status_mapping.h"

namespace inferd {

// "/a/b//c" -> {"a", "b", "c"}
inline std::vector<std::string_view> SplitPath(std::string_view path) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (start < path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string_view::npos) slash = path.size();
    if (slash > start) parts.push_back(path.substr(start, slash - start));
    start = slash + 1;
  }
  return parts;
}

inline HttpResponse Json(unsigned status, std::string body) { return {status, "application/json", std::move(body), {}}; }
// {"error": "..."}: the error body of both APIs.
inline HttpResponse Error(unsigned status, std::string_view message) { return Json(status, ErrorJson(message)); }
inline HttpResponse Error(const Status& status) { return Error(HttpStatusFor(status.code()), status.message()); }

inline HttpResponse MethodNotAllowed(const char* allowed) {
  HttpResponse response = Error(405, std::string("method not allowed; use ") + allowed);
  response.headers.emplace_back("Allow", allowed);
  return response;
}

}  // namespace inferd
