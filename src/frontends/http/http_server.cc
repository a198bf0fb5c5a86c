#include "frontends/http/http_server.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <charconv>
#include <chrono>
#include <utility>

#include "common/string_pool.h"
#include "frontends/http/kserve_codec.h"  // ErrorJson
#include "frontends/http/pooled_string_body.h"

namespace inferd {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using beast::error_code;

HttpMethod MethodOf(http::verb verb) {
  switch (verb) {
    case http::verb::get:
      return HttpMethod::kGet;
    case http::verb::post:
      return HttpMethod::kPost;
    default:
      return HttpMethod::kOther;
  }
}

// The status line and headers of an answer. Written here rather than by Beast's serializer, whose
// generic header container allocates per field and whose buffer sequences cost ~2 us per small
// answer (9% of a small request's user time at concurrency 8); an answer's head is a few lines.
void AppendAnswerHead(std::string& out, const HttpResponse& response, unsigned version, bool keep_alive) {
  char number[24];
  auto append_number = [&](uint64_t value) {
    out.append(number, std::to_chars(number, number + sizeof number, value).ptr);
  };
  out.append(version == 10 ? "HTTP/1.0 " : "HTTP/1.1 ");
  append_number(response.status);
  auto reason = http::obsolete_reason(static_cast<http::status>(response.status));
  out.append(" ").append(reason.data(), reason.size()).append("\r\nServer: inferd\r\nContent-Type: ");
  out.append(response.content_type).append("\r\nContent-Length: ");
  append_number(response.body.size());
  out.append("\r\n");
  for (const auto& [name, value] : response.headers)
    out.append(name).append(": ").append(value).append("\r\n");
  // HTTP/1.1 keeps a connection open unless told; HTTP/1.0 closes it unless told.
  if (version == 10 && keep_alive) out.append("Connection: keep-alive\r\n");
  if (version != 10 && !keep_alive) out.append("Connection: close\r\n");
  out.append("\r\n");
}

class Session;

// The connections of one I/O thread and one periodic timer that closes those past their deadline.
// Why not Beast's tcp_stream timeouts: they arm a timer on every read and cancel it on completion,
// a timerfd syscall and an extra handler per request (dropping them saved ~8 us of the ~45 us of
// CPU a small request cost at concurrency 8).
// Only the owning I/O thread touches it.
class IdleSweeper {
 public:
  IdleSweeper(net::io_context& context, std::chrono::milliseconds period)
      : timer_(context), period_(period) {}

  void Add(std::weak_ptr<Session> session) { sessions_.push_back(std::move(session)); }

  void Start() {
    timer_.expires_after(period_);
    timer_.async_wait([this](error_code ec) {
      if (ec) return;
      Sweep();
      Start();
    });
  }

 private:
  void Sweep();

  net::steady_timer timer_;
  std::chrono::milliseconds period_;
  std::vector<std::weak_ptr<Session>> sessions_;
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  using Clock = std::chrono::steady_clock;

  Session(tcp::socket socket, const HttpServerOptions& options, const HttpHandler& handler,
          std::atomic<int64_t>* requests_in_progress, IdleSweeper* sweeper)
      : socket_(std::move(socket)),
        options_(options),
        handler_(handler),
        in_progress_(requests_in_progress),
        sweeper_(sweeper) {}

  void Start() {
    net::dispatch(socket_.get_executor(), [self = shared_from_this()] {
      self->sweeper_->Add(self);
      self->ReadHeader();
    });
  }

  // Called by the sweeper on this connection's thread.
  void CloseIfPastDeadline(Clock::time_point now) {
    if (now >= deadline_) Close();
  }

 private:
  void ReadHeader() {
    parser_.emplace();
    parser_->body_limit(options_.max_body_bytes);
    parser_->header_limit(options_.max_header_bytes);
    deadline_ = Clock::now() + options_.idle_timeout;
    http::async_read_header(socket_, buffer_, *parser_,
                            beast::bind_front_handler(&Session::OnHeader, shared_from_this()));
  }

  void OnHeader(error_code ec, size_t) {
    if (ec) return OnReadError(ec);
    auto& request = parser_->get();
    // Beast reads at most the buffer's free capacity (never under 512 bytes) at a time, and a
    // fresh buffer is small: a 600 KB body came in ~1000 reads, each a syscall and a handler. Room for
    // 64 KiB (Beast's largest read) makes it ~10; small bodies keep the small buffer.
    if (auto length = parser_->content_length(); length && *length > kLargeBodyBytes)
      buffer_.reserve(kLargeBodyReadBytes);
    if (beast::iequals(request[http::field::expect], "100-continue")) {
      // The client waits for this before sending the body; the body limit was already checked
      // against Content-Length, so an oversized upload gets its 413 instead of a 100.
      auto response =
          std::make_shared<http::response<http::empty_body>>(http::status::continue_, request.version());
      http::async_write(socket_, *response,
                        [self = shared_from_this(), response](error_code write_ec, size_t) {
                          if (write_ec) return self->Close();
                          self->ReadBody();
                        });
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    http::async_read(socket_, buffer_, *parser_,
                     beast::bind_front_handler(&Session::OnRead, shared_from_this()));
  }

  void OnReadError(error_code ec) {
    if (ec == http::error::body_limit)
      return WriteErrorAndClose(413, "request body is larger than the limit");
    if (ec == http::error::header_limit) return WriteErrorAndClose(431, "request headers are too large");
    if (ec.category() == http::make_error_code(http::error::bad_target).category() &&
        ec != http::error::end_of_stream && ec != http::error::partial_message) {
      return WriteErrorAndClose(400, "malformed HTTP request");
    }
    Close();
  }

  void OnRead(error_code ec, size_t) {
    if (ec) return OnReadError(ec);
    deadline_ = Clock::time_point::max();  // a request may take long; the idle limit applies between requests
    auto message = parser_->release();
    keep_alive_ = message.keep_alive();
    version_ = message.version();
    HttpRequest request;
    request.method = MethodOf(message.method());
    auto beast_target = message.target();
    std::string_view target(beast_target.data(), beast_target.size());
    request.path = std::string(target.substr(0, target.find('?')));
    auto header = message.find("Inference-Header-Content-Length");
    if (header != message.end()) {
      size_t length = 0;
      std::string_view text(header->value().data(), header->value().size());
      auto [end, parse_error] = std::from_chars(text.data(), text.data() + text.size(), length);
      if (parse_error != std::errc() || end != text.data() + text.size()) {
        return Write(
            {400, "application/json", ErrorJson("Inference-Header-Content-Length is not a number"), {}});
      }
      request.inference_header_length = length;
    }
    request.body = BodyStringPool().Share(std::move(message.body()));
    in_progress_->fetch_add(1);
    counted_ = true;
    handler_(std::move(request), [self = shared_from_this()](HttpResponse response) {
      net::post(self->socket_.get_executor(),
                [self, response = std::move(response)]() mutable { self->Write(std::move(response)); });
    });
  }

  void Write(HttpResponse response, bool close_after = false) {
    const bool keep_alive = keep_alive_ && !close_after;
    answer_head_.clear();
    AppendAnswerHead(answer_head_, response, version_, keep_alive);
    answer_body_ = std::move(response.body);
    std::array<net::const_buffer, 2> answer{net::buffer(answer_head_), net::buffer(answer_body_)};
    net::async_write(socket_, answer, [self = shared_from_this(), keep_alive](error_code ec, size_t) {
      BodyStringPool().Give(std::exchange(self->answer_body_, {}));  // an idle connection holds no answer
      if (self->counted_) {
        self->counted_ = false;
        self->in_progress_->fetch_sub(1);  // answered: the drain may finish
      }
      if (ec) return self->Close();
      if (!keep_alive) return self->LingeringClose();
      self->ReadHeader();
    });
  }

  void WriteErrorAndClose(unsigned status, std::string_view message) {
    Write({status, "application/json", ErrorJson(message), {}}, /*close_after=*/true);
  }

  // Stop sending, then discard what the client still sends (bounded), so it reads our answer
  // instead of a connection reset.
  void LingeringClose() {
    error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
    deadline_ = Clock::now() + std::chrono::seconds(5);
    Discard();
  }

  void Discard() {
    discard_.resize(64 * 1024);
    socket_.async_read_some(net::buffer(discard_), [self = shared_from_this()](error_code ec, size_t n) {
      self->discarded_ += n;
      if (ec || self->discarded_ > 2 * self->options_.max_body_bytes + (1u << 20)) return self->Close();
      self->Discard();
    });
  }

  void Close() {
    error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

  static constexpr uint64_t kLargeBodyBytes = 16 * 1024;
  static constexpr size_t kLargeBodyReadBytes = 64 * 1024;

  tcp::socket socket_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<PooledStringBody>> parser_;
  const HttpServerOptions& options_;
  const HttpHandler& handler_;
  std::atomic<int64_t>* in_progress_;
  IdleSweeper* sweeper_;
  // While reading a request (or draining a closed one): when the connection is closed as idle.
  Clock::time_point deadline_ = Clock::time_point::max();
  bool counted_ = false;  // this connection has a request between read and written answer
  bool keep_alive_ = true;
  unsigned version_ = 11;
  std::string answer_head_;  // kept between answers: its capacity is reused
  std::string answer_body_;  // only while it is being written
  std::vector<char> discard_;
  uint64_t discarded_ = 0;
};

void IdleSweeper::Sweep() {
  const auto now = Session::Clock::now();
  for (size_t i = 0; i < sessions_.size();) {
    if (auto session = sessions_[i].lock()) {
      session->CloseIfPastDeadline(now);
      ++i;
    } else {
      sessions_[i] = std::move(sessions_.back());  // closed and gone: forget it
      sessions_.pop_back();
    }
  }
}

// Often enough that a connection outlives its idle limit by at most a quarter of it (or a second).
std::chrono::milliseconds SweepPeriod(std::chrono::milliseconds idle_timeout) {
  return std::clamp(idle_timeout / 4, std::chrono::milliseconds(10), std::chrono::milliseconds(1000));
}

}  // namespace

// One io_context per I/O thread: a connection lives on one thread for its whole life, so its
// handlers need no strand, and answers posted from instance threads wake exactly that thread.
struct IoThread {
  explicit IoThread(std::chrono::milliseconds idle_timeout) : sweeper(context, SweepPeriod(idle_timeout)) {}

  net::io_context context{1};  // concurrency hint: one thread runs it
  // While a model computes an answer no socket operation is pending; without this guard the
  // thread would return from run() and the answer would never be sent.
  net::executor_work_guard<net::io_context::executor_type> keep_running{context.get_executor()};
  IdleSweeper sweeper;
  std::thread thread;
};

struct HttpServer::Impl {
  Impl(HttpServerOptions opts, HttpHandler h) : options(std::move(opts)), handler(std::move(h)) {
    for (int i = 0; i < std::max(1, options.io_threads); ++i)
      io.push_back(std::make_unique<IoThread>(options.idle_timeout));
    acceptor.emplace(io[0]->context);
  }

  void Accept() {
    IoThread& target = *io[next_thread++ % io.size()];
    acceptor->async_accept(target.context, [this, &target](error_code ec, tcp::socket socket) {
      if (ec == net::error::operation_aborted || !acceptor->is_open()) return;
      if (!ec) {
        // Answers are small and written whole; never let Nagle hold one back waiting for an ACK.
        error_code ignored;
        socket.set_option(tcp::no_delay(true), ignored);
        std::make_shared<Session>(std::move(socket), options, handler, &requests_in_progress, &target.sweeper)
            ->Start();
      }
      Accept();
    });
  }

  HttpServerOptions options;
  HttpHandler handler;
  std::vector<std::unique_ptr<IoThread>> io;
  std::optional<tcp::acceptor> acceptor;  // runs on io[0]
  size_t next_thread = 0;                 // only touched by io[0]'s thread
  uint16_t bound_port = 0;
  std::atomic<int64_t> requests_in_progress{0};
};

HttpServer::HttpServer(HttpServerOptions options, HttpHandler handler)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(handler))) {}

HttpServer::~HttpServer() { Stop(); }

Status HttpServer::Start() {
  error_code ec;
  auto address = net::ip::make_address(impl_->options.address, ec);
  if (ec) return Status::InvalidArgument("bad listen address '" + impl_->options.address + "'");
  tcp::endpoint endpoint(address, impl_->options.port);
  auto& acceptor = *impl_->acceptor;
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return Status::Unavailable("cannot listen on " + impl_->options.address + ":" +
                               std::to_string(impl_->options.port) + ": " + ec.message());
  }
  impl_->bound_port = acceptor.local_endpoint().port();
  impl_->Accept();
  for (auto& io : impl_->io) {
    net::post(io->context, [sweeper = &io->sweeper] { sweeper->Start(); });
    io->thread = std::thread([context = &io->context] { context->run(); });
  }
  return Status::Ok();
}

uint16_t HttpServer::port() const { return impl_->bound_port; }

void HttpServer::StopAccepting() {
  net::post(impl_->acceptor->get_executor(), [this] {
    error_code ignored;
    impl_->acceptor->close(ignored);
  });
}

bool HttpServer::WaitForIdle(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (impl_->requests_in_progress.load() > 0) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

void HttpServer::Stop() {
  for (auto& io : impl_->io) {
    io->keep_running.reset();
    io->context.stop();
  }
  for (auto& io : impl_->io) {
    if (io->thread.joinable()) io->thread.join();
  }
}

}  // namespace inferd
