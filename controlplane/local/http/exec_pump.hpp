#pragma once

#include "controlplane/local/http/http_options.hpp"
#include "controlplane/local/http/utf8_repair.hpp"
#include "controlplane/local/service/sandbox_service.hpp"

#include <array>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace guestflow::local {

/// One NDJSON line of a streamed exec (without the '\n'); the exit_code line carries the
/// program's own run as `exec_ms` (what a buffered exec answers), so a streamed run's time
/// is not the client's wait either.
std::string stream_line(exec_stream_line::kind kind, std::string text = {}, int32_t code = 0,
                        std::optional<uint64_t> exec_ms = std::nullopt);

/// A buffered exec's answer as a typed failure instead of a result: a command whose
/// workspace lost writes is `guest_failed` (`workspace_io_error: …`), never an exit code a
/// caller could read as success. Streamed, the same error goes out as an `error` line before
/// exit code 74 (EX_IOERR).
std::optional<failure> exec_failure(const exec_result& r);

/// Drives one running_exec on the I/O thread without blocking it: reads both pipes as
/// output arrives (repairing UTF-8, capping each stream: past the cap output is drained
/// and discarded, so memory stays bounded), waits for the exit fd, then reaps the command
/// on a worker thread. Buffered mode accumulates (up to the caps); streaming mode hands
/// each chunk out as an NDJSON line and reads on only once the line was written
/// (backpressure: a slow client slows the command, never grows the server's memory).
class exec_pump : public std::enable_shared_from_this<exec_pump> {
public:
  /// Streaming: one NDJSON line (no '\n'); call `written` once the client took it.
  using emit_fn = std::function<void(std::string line, std::function<void()> written)>;
  /// Buffered: the full result; streaming: exit code and the error not yet emitted.
  using done_fn = std::function<void(exec_result)>;

  exec_pump(boost::asio::any_io_executor io, boost::asio::thread_pool& workers,
            std::unique_ptr<running_exec> run, exec_limits limits,
            std::chrono::steady_clock::time_point started, emit_fn emit, done_fn done);

  /// Takes the pump's own duplicates of the command's fds (start() does it if not done
  /// yet). A duplicate that cannot be made (EMFILE/ENFILE: the process is out of file
  /// descriptors) returns why: read as "no such pipe", it lost the command's whole output
  /// and reported a clean exit (10,000 streamed execs on a 20,000-fd limit).
  std::optional<std::string> open();

  /// After a failed open(): kills the command and reaps it on a worker; `done` never runs.
  void abandon();

  /// Begins reading; `emit` empty means buffered mode. If open() fails here, the command
  /// is killed and `done` gets an error saying why, never a silent empty output.
  void start();

  /// The client went away (or the server stops): SIGKILL the command; the pump still
  /// drains and reaps it, and `done` still runs.
  void client_gone();

private:
  struct channel {
    explicit channel(boost::asio::any_io_executor io)
        : sd(io) {}
    boost::asio::posix::stream_descriptor sd;
    bool is_stderr = false;
    bool open = false;
    bool truncated = false;
    uint64_t total = 0;
    uint64_t cap = 0;
    utf8_repair utf8;
    std::string kept; ///< buffered mode
    std::array<char, 64 * 1024> buf{};
  };

  void read(channel& c);
  void deliver(channel& c, std::string_view bytes, bool eof);
  void emit_lines(std::vector<std::string> lines, std::function<void()> then);
  void on_exit();
  void maybe_finish();

  boost::asio::any_io_executor io_;
  boost::asio::strand<boost::asio::thread_pool::executor_type> worker_;
  std::unique_ptr<running_exec> run_;
  exec_limits limits_;
  std::chrono::steady_clock::time_point started_; ///< the call's arrival (not the program's)
  /// The program's own run, which exec_ms reports when the domain did not measure it
  /// (exec_outcome::ran_ms, a guest command's exit watcher): from its spawn (the kernel's
  /// start time of the process behind the exit fd; else when this pump was made, once
  /// start_exec returned) to its exit fd turning readable — not the wait for a worker before
  /// it, nor the reap, write-back and answer after it (but a stall of the server before it
  /// sees the exit).
  std::chrono::steady_clock::time_point spawned_ = std::chrono::steady_clock::now();
  std::optional<std::chrono::steady_clock::time_point> exited_at_;
  emit_fn emit_;
  done_fn done_;
  channel out_;
  channel err_;
  boost::asio::posix::stream_descriptor exit_;
  boost::asio::steady_timer grace_;
  bool exited_ = false;
  bool finishing_ = false;
  bool killed_ = false;
  bool opened_ = false;
  std::optional<std::string> open_error_;
};

} // namespace guestflow::local
