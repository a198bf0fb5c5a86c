// A small asynchronous HTTP/1.1 server on Boost.Beast: keep-alive, a body limit (413), a header
// limit (431), and handlers that answer later from any thread. The I/O threads only parse and
// write; a handler that has real work hands it off and calls the Responder when done.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/status.h"

namespace inferd {

enum class HttpMethod { kGet, kPost, kOther };

struct HttpRequest {
  HttpMethod method = HttpMethod::kOther;
  std::string path;                               // without the query string
  std::optional<size_t> inference_header_length;  // Inference-Header-Content-Length
  std::shared_ptr<const std::string> body;
};

struct HttpResponse {
  unsigned status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

// Call exactly once, from any thread.
using Responder = std::function<void(HttpResponse)>;
using HttpHandler = std::function<void(HttpRequest request, Responder respond)>;

struct HttpServerOptions {
  std::string address = "0.0.0.0";
  uint16_t port = 8000;  // 0: pick a free port (tests)
  int io_threads = 2;
  uint64_t max_body_bytes = 64ull << 20;
  uint32_t max_header_bytes = 16 * 1024;
  // A connection that sends nothing (or only part of a request) for this long is closed.
  std::chrono::milliseconds idle_timeout = std::chrono::seconds(120);
};

class HttpServer {
 public:
  HttpServer(HttpServerOptions options, HttpHandler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and starts the I/O threads.
  Status Start();
  uint16_t port() const;
  // Closes the listening socket; open connections keep being served.
  void StopAccepting();
  // Waits until every request read so far has its answer written (bounded by `timeout`).
  bool WaitForIdle(std::chrono::milliseconds timeout);
  // Stops the I/O threads (open connections are dropped).
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace inferd
