#pragma once

#include "tests/support/self_signed.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

/// A small scriptable HTTP/1.1 server on 127.0.0.1:0 for the client's integration tests:
/// a real Beast request parser and serializer on real sockets (optionally TLS), one thread
/// per connection so a route handler may block on a `gate` the test opens. It counts
/// accepted connections, requests per route, and writes that failed because the client
/// went away.
namespace gft {

/// A one-shot signal between the test and a handler (no sleeps: handlers wait on it).
class gate {
public:
  void open();
  bool is_open() const;
  /// Waits until opened (true) or `max` passed / the server stops (false).
  bool wait(std::chrono::milliseconds max = std::chrono::seconds{20});

private:
  friend class loopback_server;
  mutable std::mutex mtx_;
  std::condition_variable cv_;
  bool open_ = false;
  bool abandoned_ = false;
};

struct http_request {
  std::string method;
  std::string target; ///< as received (path + query)
  std::string path;   ///< before '?'
  std::string query;  ///< after '?', still encoded
  std::string body;
  std::map<std::string, std::string> headers; ///< lower-case names
  size_t connection = 0;        ///< index of the connection (accept order, from 0)
  size_t nth_on_connection = 0; ///< 0 for the first request of a connection

  /// A header's value ("" when absent); `name` in lower case.
  std::string header(const std::string& name) const {
    auto i = headers.find(name);
    return i == headers.end() ? std::string() : i->second;
  }
};

class connection_io;

/// One request being answered. Every write reports whether it reached the socket.
class exchange {
public:
  exchange(const http_request& r, connection_io& io)
      : req(r)
      , io_(io) {}

  const http_request& req;

  /// A complete response with Content-Length; Connection: close when !keep_alive.
  bool respond(unsigned status, std::string body,
               std::vector<std::pair<std::string, std::string>> headers = {},
               bool keep_alive = true);
  /// A JSend body (`{"status":"success","data":…}`) with 200.
  bool success(std::string_view data_json);

  /// Header of a chunked response, then chunks, then the last chunk.
  bool begin_chunked(unsigned status, std::string_view content_type = "application/x-ndjson");
  bool chunk(std::string_view data);
  bool end_chunked();

  /// Header with an explicit Content-Length, then raw body bytes.
  bool begin_sized(unsigned status, uint64_t content_length,
                   std::string_view content_type = "application/octet-stream");
  bool raw(std::string_view bytes);

  /// Closes the connection after this exchange (or right now, mid-body).
  void close_now();

  bool responded() const noexcept { return responded_; }
  bool closed() const noexcept { return closed_; }
  bool keep_alive() const noexcept { return keep_alive_; }

private:
  bool note(bool ok);
  connection_io& io_;
  bool responded_ = false;
  bool closed_ = false;
  bool keep_alive_ = true;
};

using handler = std::function<void(exchange&)>;

class loopback_server {
public:
  struct options {
    bool tls = false;
    std::string cert_pem; ///< for tls
    std::string key_pem;  ///< for tls
  };

  loopback_server();
  explicit loopback_server(options opts);
  ~loopback_server();

  loopback_server(const loopback_server&) = delete;
  loopback_server& operator=(const loopback_server&) = delete;

  /// `path` without query. Unrouted requests get 404 with a fail envelope.
  void route(const std::string& method, const std::string& path, handler h);
  /// Answers every request no route matches (a stand-in forwarding the rest elsewhere).
  void fallback(handler h);

  /// A gate that `stop()` abandons, so a handler waiting on it never outlives the server.
  std::shared_ptr<gate> make_gate();

  uint16_t port() const noexcept { return port_; }
  std::string url() const; ///< http(s)://127.0.0.1:PORT

  size_t hits(const std::string& method, const std::string& path) const;
  size_t connections() const noexcept { return accepted_.load(); }
  size_t closed_connections() const noexcept { return closed_.load(); }
  size_t write_failures() const noexcept { return write_failures_.load(); }
  size_t tls_failures() const noexcept { return tls_failures_.load(); }
  /// The SNI server name of every TLS connection that completed its handshake, in order
  /// ("" for a hello without one).
  std::vector<std::string> server_names() const;
  std::vector<http_request> requests() const;

  /// Waits until `pred()` holds, re-checked whenever the server's counters change.
  bool wait_until(const std::function<bool()>& pred,
                  std::chrono::milliseconds max = std::chrono::seconds{20});

  void stop();

private:
  struct impl;
  void accept_loop();
  void serve(size_t index, std::shared_ptr<connection_io> io);
  void changed();

  std::unique_ptr<impl> impl_;
  uint16_t port_ = 0;
  bool tls_ = false;
  std::atomic<size_t> accepted_{0};
  std::atomic<size_t> closed_{0};
  std::atomic<size_t> write_failures_{0};
  std::atomic<size_t> tls_failures_{0};
  std::atomic<bool> stopping_{false};
  friend class exchange;
};

/// A self-signed certificate + key (PEM) for `subject_alt_names`, its own CA
/// (tests/support/self_signed.hpp).
using guestflow::test_support::make_self_signed;
using guestflow::test_support::self_signed;

} // namespace gft
