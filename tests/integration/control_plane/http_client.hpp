#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

/// A small blocking HTTP/1.1 client for tests and benches: one request per connection,
/// every operation bounded by a deadline (Beast async ops run on a private io_context).
namespace guestflow::testing {

struct http_reply {
  unsigned status = 0;
  std::string body;
  std::map<std::string, std::string> headers; ///< lower-case names
};

using header_map = std::map<std::string, std::string>;

class http_client {
public:
  explicit http_client(uint16_t port, std::string api_key = {});

  /// Sends one request and reads the whole reply. Throws std::runtime_error on transport
  /// failure or when `timeout` passes.
  http_reply call(const std::string& method, const std::string& target,
                  const std::string& body = {}, const header_map& headers = {},
                  std::chrono::milliseconds timeout = std::chrono::seconds{60}) const;

  uint16_t port() const { return port_; }
  const std::string& api_key() const { return api_key_; }

private:
  uint16_t port_;
  std::string api_key_;
};

/// A request whose reply body is read incrementally, line by line (streamed exec). The
/// request is sent at construction; the reply header is read on first use.
class http_stream {
public:
  http_stream(const http_client& client, const std::string& method, const std::string& target,
              const std::string& body, const header_map& headers = {});
  ~http_stream();
  http_stream(const http_stream&) = delete;
  http_stream& operator=(const http_stream&) = delete;

  unsigned status() const;
  const std::map<std::string, std::string>& headers() const;

  /// The next line of the body (without '\n'); nullopt at the end of the body. Throws
  /// std::runtime_error when `timeout` passes first.
  std::optional<std::string> next_line(std::chrono::milliseconds timeout);

  /// Closes the connection abruptly (a client that went away).
  void disconnect();

private:
  void ensure_header() const;
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// Percent-encodes a query value (slashes kept, as in ?path=/workspace/x).
std::string url_encode(const std::string& s);

} // namespace guestflow::testing
