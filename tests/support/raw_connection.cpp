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

bool raw_connection::read_more(std::string& got, std::chrono::steady_clock::time_point until,
                               bool& timed_out) {
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    if (left.count() <= 0) return !(timed_out = true);
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[4096];
    auto n = ::recv(fd_, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false; // EOF (or a reset after the reply)
    got.append(buf, static_cast<size_t>(n));
    return true;
  }
}

std::string raw_connection::read_to_close(std::chrono::milliseconds deadline) {
  std::string got;
  bool timed_out = false;
  auto until = std::chrono::steady_clock::now() + deadline;
  while (read_more(got, until, timed_out)) {
  }
  return timed_out ? got + "TIMEOUT" : got;
}

std::string raw_connection::read_until(const std::string& needle,
                                       std::chrono::milliseconds deadline) {
  std::string got;
  bool timed_out = false;
  auto until = std::chrono::steady_clock::now() + deadline;
  while (got.find(needle) == std::string::npos)
    if (!read_more(got, until, timed_out)) return got + "TIMEOUT";
  return got;
}

void raw_connection::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

} // namespace guestflow::test_support
