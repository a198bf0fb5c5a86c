// HttpServer's connection handling over real loopback sockets: idle connections are closed after
// the idle limit, busy ones never are.
#include "frontends/http/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <utility>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace inferd {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr auto kIdleTimeout = 200ms;

// A blocking client socket with a receive timeout, so a test never hangs.
class Client {
 public:
  explicit Client(uint16_t port) : fd_(socket(AF_INET, SOCK_STREAM, 0)) {
    timeval receive_timeout{.tv_sec = 5, .tv_usec = 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &receive_timeout, sizeof receive_timeout);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  }
  ~Client() { close(fd_); }

  bool connected() const { return connected_; }
  void Send(const std::string& bytes) {
    ASSERT_EQ(send(fd_, bytes.data(), bytes.size(), 0), ssize_t(bytes.size()));
  }

  // Reads until one whole answer with a Content-Length body is in; "" when the server closed first.
  std::string ReadAnswer() {
    std::string answer;
    char chunk[4096];
    while (true) {
      auto header_end = answer.find("\r\n\r\n");
      if (header_end != std::string::npos) {
        auto length_at = answer.find("Content-Length: ");
        size_t length = length_at == std::string::npos ? 0 : std::stoul(answer.substr(length_at + 16));
        if (answer.size() >= header_end + 4 + length) return answer;
      }
      ssize_t n = recv(fd_, chunk, sizeof chunk, 0);
      if (n <= 0) return "";
      answer.append(chunk, size_t(n));
    }
  }

  // How long until the server closes the connection (recv returns 0); 5 s if it never does.
  Clock::duration TimeUntilClosed() {
    auto start = Clock::now();
    char byte;
    while (recv(fd_, &byte, 1, 0) > 0) {
    }
    return Clock::now() - start;
  }

 private:
  int fd_;
  bool connected_ = false;
};

const std::string kRequest = "GET /ping HTTP/1.1\r\nHost: x\r\n\r\n";

class HttpServerTest : public ::testing::Test {
 protected:
  void StartServer(std::chrono::milliseconds answer_after = 0ms) {
    server_ = std::make_unique<HttpServer>(
        HttpServerOptions{.address = "127.0.0.1", .port = 0, .io_threads = 2, .idle_timeout = kIdleTimeout},
        [this, answer_after](HttpRequest, Responder respond) {
          // Answers from another thread, as the model's instance thread does.
          std::lock_guard lock(answerers_mutex_);
          answerers_.emplace_back([answer_after, respond = std::move(respond)] {
            std::this_thread::sleep_for(answer_after);
            respond({200, "text/plain", "pong", {}});
          });
        });
    ASSERT_TRUE(server_->Start().ok());
  }

  // Answers every request with its body, as read.
  void StartEchoServer() {
    server_ = std::make_unique<HttpServer>(
        HttpServerOptions{.address = "127.0.0.1", .port = 0, .io_threads = 2, .idle_timeout = 5s},
        [](HttpRequest request, Responder respond) { respond({200, "application/octet-stream", *request.body, {}}); });
    ASSERT_TRUE(server_->Start().ok());
  }

  void TearDown() override {
    server_->Stop();
    for (auto& answerer : answerers_) answerer.join();
    server_.reset();
  }

  std::unique_ptr<HttpServer> server_;
  std::mutex answerers_mutex_;
  std::vector<std::thread> answerers_;
};

TEST_F(HttpServerTest, ClosesAConnectionThatSendsNothing) {
  StartServer();
  Client client(server_->port());
  ASSERT_TRUE(client.connected());
  auto closed_after = client.TimeUntilClosed();
  EXPECT_GE(closed_after, kIdleTimeout - 20ms);
  EXPECT_LT(closed_after, 2s);
}

TEST_F(HttpServerTest, ClosesAConnectionStuckInsideItsHeader) {
  StartServer();
  Client client(server_->port());
  client.Send("GET /ping HTTP/1.1\r\nHost:");
  EXPECT_LT(client.TimeUntilClosed(), 2s);
}

TEST_F(HttpServerTest, KeepsAKeepAliveConnectionThatKeepsSending) {
  StartServer();
  Client client(server_->port());
  // Five requests 100 ms apart: 500 ms in all, well past the 200 ms limit, but never idle that long.
  for (int i = 0; i < 5; ++i) {
    client.Send(kRequest);
    EXPECT_NE(client.ReadAnswer().find("pong"), std::string::npos) << "request " << i;
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_LT(client.TimeUntilClosed(), 2s);  // idle from now on: closed
}

TEST_F(HttpServerTest, NeverClosesAConnectionWaitingForItsAnswer) {
  StartServer(/*answer_after=*/600ms);  // three idle limits
  Client client(server_->port());
  client.Send(kRequest);
  EXPECT_NE(client.ReadAnswer().find("pong"), std::string::npos);
}

std::string Pattern(size_t bytes, char first) {
  std::string body(bytes, ' ');
  for (size_t i = 0; i < bytes; ++i) body[i] = static_cast<char>(first + i % 23);
  return body;
}

std::string BodyOf(const std::string& answer) { return answer.substr(answer.find("\r\n\r\n") + 4); }

// Large bodies are read into pooled strings: one connection's bodies, each smaller than the one
// before (so each reuses an earlier one's string), arrive whole with nothing of the one before,
// whether sized by Content-Length or chunked.
TEST_F(HttpServerTest, LargeBodiesArriveWholeOneAfterAnother) {
  StartEchoServer();
  Client client(server_->port());
  for (const auto& [bytes, first] : {std::pair<size_t, char>{400 * 1024, 'a'}, {300 * 1024, 'A'}, {200 * 1024, '0'}}) {
    const std::string body = Pattern(bytes, first);
    client.Send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(bytes) + "\r\n\r\n" + body);
    EXPECT_EQ(BodyOf(client.ReadAnswer()), body) << bytes << " bytes";
  }
  const std::string chunked = Pattern(150 * 1024, 'k');
  std::string request = "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (size_t at = 0; at < chunked.size(); at += 50 * 1024) {
    char size[16];
    snprintf(size, sizeof size, "%zx\r\n", std::min<size_t>(50 * 1024, chunked.size() - at));
    request += size + chunked.substr(at, 50 * 1024) + "\r\n";
  }
  client.Send(request + "0\r\n\r\n");
  EXPECT_EQ(BodyOf(client.ReadAnswer()), chunked);
}

}  // namespace
}  // namespace inferd
