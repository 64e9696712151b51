#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace guestflow::test_support {

/// A raw TCP connection to 127.0.0.1:port, for callers that misbehave on purpose: malformed
/// bytes, or a caller that vanishes mid-call.
class raw_connection {
public:
  explicit raw_connection(uint16_t port);
  ~raw_connection() { close(); }
  raw_connection(const raw_connection&) = delete;
  raw_connection& operator=(const raw_connection&) = delete;

  /// All of `bytes`; throws when the peer refuses them.
  void send(const std::string& bytes);

  /// Everything the server sends until it closes (or `deadline` passes: then "TIMEOUT" is
  /// appended, which no expectation accepts).
  std::string read_to_close(std::chrono::milliseconds deadline = std::chrono::seconds{60});

  /// What arrives until `needle` has (included; bytes after it in the same read too), or
  /// what came with "TIMEOUT" appended once `deadline` passes or the peer closes first.
  std::string read_until(const std::string& needle,
                         std::chrono::milliseconds deadline = std::chrono::seconds{60});

  /// Gone as a SIGKILLed process goes: the socket closed, nothing more said.
  void close();

private:
  /// Appends what one read brings; false once the peer has closed or `until` has passed
  /// (then `timed_out` is set).
  bool read_more(std::string& got, std::chrono::steady_clock::time_point until,
                 bool& timed_out);

  int fd_;
};

} // namespace guestflow::test_support
