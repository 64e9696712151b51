#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

/// The bridge bench's load generator: N keep-alive HTTP/1.1 connections on one Asio
/// thread, each doing `POST /v1/runs` (stream: true) in a closed loop and reading the
/// chunked NDJSON answer line by line until the terminal event (Beast client).
namespace guestflow::bench {

using steady = std::chrono::steady_clock;

struct load_target {
  uint16_t port = 0;
  std::string body;                    ///< the POST /v1/runs body
  size_t expected_events = 0;          ///< per completed run (0: not checked)
  std::chrono::seconds op_timeout{60}; ///< per connect / write / read
};

/// One request: a run that streamed to its terminal event, or a failure before that.
struct run_record {
  steady::time_point start;        ///< request write began
  steady::time_point first;        ///< first event line read (epoch: none)
  steady::time_point end;          ///< terminal event read (or the failure noticed)
  uint32_t events = 0;             ///< event lines read
  unsigned status = 0;             ///< HTTP status (0: none read)
  std::string error;               ///< empty: `complete`; else why not (category first)
  bool protocol_violation = false; ///< the stream broke the API's contract
};

struct load_result {
  std::vector<run_record> runs; ///< every request of the level, in completion order
  size_t unfinished = 0;        ///< connections still busy at the drain deadline
};

/// Runs `streams` connections from now on: requests start until `stop_at`, then every
/// connection finishes its current run and closes. `finish` waits (up to `drain`) for that.
class load_generator {
public:
  load_generator(load_target target, size_t streams, steady::time_point stop_at);
  ~load_generator();
  load_generator(const load_generator&) = delete;
  load_generator& operator=(const load_generator&) = delete;

  /// Joins the I/O thread (after at most `drain`: then it is stopped and the busy
  /// connections counted as unfinished) and hands over the records.
  load_result finish(std::chrono::seconds drain);

  /// CPU seconds (user + system) of the generator's I/O thread so far.
  double io_thread_cpu_seconds() const;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace guestflow::bench
