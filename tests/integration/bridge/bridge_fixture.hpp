#pragma once

// `guestflow serve` as Langflow reaches it: a real server process on 127.0.0.1:0 in front
// of a real local control plane (a second child), real guests behind both.

#include "messages/run.hpp"
#include "tests/integration/control_plane/http_client.hpp"
#include "tests/integration/runtime/runtime_fixture.hpp"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace guestflow::testing {

class bridge_fixture : public runtime_fixture {
protected:
  const std::string token = "test-token-7d1e";
  std::unique_ptr<control_plane_process> serve;

  void SetUp() override;

  /// (Re)starts the server with these extra environment variables.
  void start_serve(std::map<std::string, std::string> extra = {});

  /// A client of the server; `authorized` adds the bearer token to every call.
  http_client client() const { return http_client{serve->port()}; }
  header_map bearer() const { return {{"Authorization", "Bearer " + token}}; }
  http_reply call(const std::string& method, const std::string& target,
                  const std::string& body = {}, bool authorized = true) const;

  /// A plain TCP connection to the server (the caller closes it), with a receive buffer of
  /// `receive_buffer` bytes when given: for clients that misbehave on purpose.
  int connect_raw(int receive_buffer = 0) const;

  /// A streamed POST /v1/runs (or any streamed request) with the token.
  std::unique_ptr<http_stream> stream(const std::string& method, const std::string& target,
                                      const std::string& body = {}) const;

  /// `{"flow": examples/flows/<name>.json, <extra>}`.
  static std::string run_body(const std::string& example, const std::string& extra = {});

  /// Every event of a stream to its end (decoded; a line that does not decode fails;
  /// keepalive blank lines skipped).
  static std::vector<run_event> drain(http_stream& s);

  /// One sample of /metrics (the first line starting with `name` + ' ').
  double metric(const std::string& name) const;

  /// Polls /metrics (deadline) until no guest is tracked or owed a delete.
  bool wait_until_no_guest_is_owed() const;
};

} // namespace guestflow::testing
