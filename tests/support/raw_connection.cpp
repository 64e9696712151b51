#include "tests/support/raw_connection.hpp"

#include <cerrno>
#include <netinet/in.h>
#include <poll.h>
#include <stdexcept>
#include <sys/socket.h>
#include <unistd.h>

namespace guestflow::test_support {

raw_connection::raw_connection(uint16_t port)
    : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
  if (fd_ < 0) throw std::runtime_error("socket failed");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close();
    throw std::runtime_error("connect failed");
  }
}

void raw_connection::send(const std::string& bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    auto n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error("send failed");
    off += static_cast<size_t>(n);
  }
}

std::string raw_connection::read_to_close(std::chrono::milliseconds deadline) {
  std::string got;
  auto until = std::chrono::steady_clock::now() + deadline;
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    if (left.count() <= 0) return got + "TIMEOUT";
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[4096];
    auto n = ::recv(fd_, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return got; // EOF (or a reset after the reply)
    got.append(buf, static_cast<size_t>(n));
  }
}

std::string raw_connection::read_until(const std::string& needle,
                                       std::chrono::milliseconds deadline) {
  std::string got;
  auto until = std::chrono::steady_clock::now() + deadline;
  while (got.find(needle) == std::string::npos) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    if (left.count() <= 0) return got + "TIMEOUT";
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[4096];
    auto n = ::recv(fd_, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return got + "TIMEOUT";
    got.append(buf, static_cast<size_t>(n));
  }
  return got;
}

void raw_connection::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

} // namespace guestflow::test_support
