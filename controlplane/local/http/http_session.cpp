#include "controlplane/local/http/http_session.hpp"

#include "controlplane/local/http/ingress_proxy.hpp"
#include "controlplane/local/http/replies.hpp"
#include "controlplane/local/http/request_reader.hpp"
#include "controlplane/local/http/routes.hpp"
#include "messages/json.hpp"

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <cstring>
#include <deque>
#include <optional>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <variant>

namespace guestflow::local {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using stream_protocol = net::generic::stream_protocol;
using error_code = boost::system::error_code;
using steady = std::chrono::steady_clock;

namespace {

constexpr size_t max_pipelined = 64 * 1024; ///< bytes a client may send during an exec

/// A guest file being sent: the open file, its size, the chunk in flight.
struct download {
  guest_file file;
  uint64_t size = 0;
  uint64_t sent = 0;
  std::vector<char> chunk;
};

result<bool> write_all(int fd, const char* data, size_t n) {
  while (n > 0) {
    auto w = ::write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == ENOSPC || errno == EDQUOT)) {
      // The guest's disk quota (a body without a length, or the guest wrote meanwhile):
      // nothing half-written stays.
      [[maybe_unused]] int rc = ::ftruncate(fd, 0);
      return fail(ec::artifact_too_large,
                  "the file does not fit: the sandbox's disk is full (its /workspace quota; "
                  "delete files in the sandbox or use a shape with more disk)");
    }
    if (w < 0)
      return fail(ec::unavailable,
                  std::string{"writing the file failed: "} + std::strerror(errno));
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

/// True when the peer has closed the connection (EOF or a reset), read without consuming:
/// a pipelined request's bytes stay in the socket for the session. Safe from a worker
/// thread while the session has no operation pending on the socket.
bool caller_gone(int fd) {
  char c;
  while (true) {
    auto n = ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0) return false;
    if (n == 0) return true;
    if (errno == EINTR) continue;
    return errno != EAGAIN && errno != EWOULDBLOCK;
  }
}

/// `run()`, unless the caller left before it started (a request queued past its caller
/// makes nothing) or before its answer is ready (then what it made is undone): nullopt
/// when nobody is there to answer.
template<class Run>
auto run_for_caller(int fd, Run& run, const std::function<void()>& undo)
    -> std::optional<decltype(run())> {
  if (caller_gone(fd)) return std::nullopt;
  auto r = run();
  if (!caller_gone(fd)) return r;
  undo();
  return std::nullopt;
}

/// A request the parser refused: a bad request line, header field, length or chunk.
bool malformed(error_code ec) {
  return ec.category() == http::make_error_code(http::error::bad_method).category() &&
         ec != http::error::end_of_stream && ec != http::error::partial_message &&
         ec != http::error::header_limit && ec != http::error::body_limit;
}

class session : public std::enable_shared_from_this<session> {
public:
  session(stream_protocol::socket socket, http_context& ctx)
      : stream_(std::move(socket))
      , ctx_(ctx)
      , hb_(stream_.get_executor())
      , latency_(stream_.get_executor())
      , read_timer_(stream_.get_executor()) {}

  void run() { read_header(); }

private:
  // ---- request cycle -------------------------------------------------------------------

  void read_header() {
    read_deadline();
    reader_.read_header([self = shared_from_this()](error_code ec) {
      self->read_done();
      self->on_header(ec);
    });
  }

  // ---- reading a request, within a deadline ----------------------------------------------

  /// Arms the deadline of the read about to start. Not the stream's own timeout: that one
  /// closes the socket, and a request that ran out of time is answered 408 first.
  void read_deadline() {
    stream_.expires_never();
    reading_ = true;
    read_timed_out_ = false;
    read_timer_.expires_after(ctx_.options.idle_timeout);
    read_timer_.async_wait([self = shared_from_this(), gen = ++read_gen_](error_code ec) {
      if (ec || !self->reading_ || gen != self->read_gen_) return;
      self->read_timed_out_ = true;
      error_code ignored;
      self->stream_.socket().cancel(ignored); // the read ends with operation_aborted
    });
  }

  void read_done() {
    reading_ = false;
    read_timer_.cancel();
  }

  /// A read of a request (`what`: "header" or "body") that failed: answered, when there is
  /// something to answer, before the connection closes — 408 (out of time with part of it
  /// received), 431 (header too large), 400 (malformed) — else closed.
  void refuse_request(error_code ec, const char* what, bool partial) {
    keep_alive_ = false;
    if (ec == net::error::operation_aborted && read_timed_out_) {
      if (!partial) return shutdown(); // an idle keep-alive connection: nothing to answer
      return send(failure_reply(408, std::string{"request timeout: the request "} + what +
                                         " did not arrive within " +
                                         std::to_string(ctx_.options.idle_timeout.count()) +
                                         " s"),
                  true);
    }
    if (ec == http::error::header_limit)
      return send(failure_reply(431, "request header fields too large: the request line and "
                                     "headers may take " +
                                         std::to_string(max_header_bytes) + " bytes"),
                  true);
    if (malformed(ec))
      return send(failure_reply(400, std::string{"malformed HTTP request "} + what + ": " +
                                         ec.message()),
                  true);
    shutdown();
  }

  void on_header(error_code ec) {
    if (ec) return refuse_request(ec, "header", reader_.header_started());
    auto& req = reader_.head().get();
    version_ = req.version();
    keep_alive_ = req.keep_alive();
    if (auto ingress =
            match_ingress(reader_.sv(req.target()), reader_.sv(req[http::field::host]),
                          ctx_.options.ingress_domain))
      return serve_ingress(std::move(*ingress));
    auto v = reader_.judge(ctx_.options);
    // An early reply (before the body was read) must close a connection with a body.
    has_body_ = v.has_body;
    if (v.then == header_verdict::next::refuse)
      return send(std::move(v.refusal), v.close, v.allow);
    target_ = std::move(v.target);
    route_ = std::move(v.matched);
    if (v.then == header_verdict::next::streamed)
      return after_latency([self = shared_from_this()] { self->streamed_request(); });
    after_continue(reader_.expects_continue(), [self = shared_from_this(), cap = v.cap] {
      self->read_deadline();
      self->reader_.read_json(cap, [self](error_code ec) {
        self->read_done();
        self->on_body(ec);
      });
    });
  }

  /// A service URL (ingress_proxy.hpp): the connection is the proxy's until it is done.
  void serve_ingress(result<ingress_request> r) {
    if (!r) {
      has_body_ = reader_.head().chunked() || reader_.head().content_length().value_or(0) > 0;
      return send(failure_reply(r.error()), has_body_);
    }
    local::serve_ingress(stream_, reader_.buffer(), reader_.head(), std::move(*r), ctx_,
                         ingress_cache_, [self = shared_from_this()](after_ingress next) {
                           if (next == after_ingress::next) return self->read_header();
                           if (next == after_ingress::linger) return self->linger();
                           self->shutdown();
                         });
  }

  void on_body(error_code ec) {
    if (ec == http::error::body_limit)
      return send(too_large(0, ctx_.options.max_json_bytes), true);
    if (ec) return refuse_request(ec, "body", true);
    auto body = reader_.json_body();
    after_latency([self = shared_from_this(), body = std::move(body)] {
      self->carry_out(self->call_handler(body));
    });
  }

  /// Runs `next` (which calls the domain) after the simulated domain's latency, waited on
  /// a timer so that waiting requests hold no worker thread; at once for real guests.
  template<class Next>
  void after_latency(Next next) {
    auto wait = ctx_.service.simulated_latency();
    if (wait.count() <= 0) return next();
    latency_.expires_after(wait);
    latency_.async_wait([self = shared_from_this(), next = std::move(next)](error_code ec) {
      if (ec) return self->shutdown();
      next();
    });
  }

  /// Answers `Expect: 100-continue` before the body is read.
  void after_continue(bool expected, std::function<void()> next) {
    if (!expected) return next();
    auto res =
        std::make_shared<http::response<http::empty_body>>(http::status::continue_, version_);
    http::async_write(stream_, *res,
                      [self = shared_from_this(), res, next](error_code ec, size_t) {
                        if (ec) return self->shutdown();
                        next();
                      });
  }

  action call_handler(std::string_view body) {
    return route_.target->handle(
        handler_request{route_.id, target_.query, body, ctx_.service, ctx_.options});
  }

  /// Does what the route's handler asked: answer, call the domain, run a command, send or
  /// receive a file.
  void carry_out(action a) {
    std::visit([this](auto& step) { perform(std::move(step)); }, a);
  }

  void perform(reply r) { send(std::move(r)); }

  void perform(domain_call call) {
    if (!call.undo)
      return offload(std::move(call.run),
                     [self = shared_from_this()](reply r) { self->send(std::move(r)); });
    // A call that made something only its answer tells of (a create): a caller gone by the
    // time the answer is ready, or whose answer cannot be written, gets it undone. A guest
    // a SIGKILLed runtime asked for would otherwise outlive the restarted runtime's sweep.
    auto undo = std::make_shared<std::function<void()>>(std::move(call.undo));
    offload([fd = stream_.socket().native_handle(), run = std::move(call.run),
             undo] { return run_for_caller(fd, run, *undo); },
            [self = shared_from_this(), undo](std::optional<reply> r) {
              if (!r) return self->shutdown();
              self->send(std::move(*r), false, {}, undo);
            });
  }

  void perform(exec_call call) { exec(std::move(call)); }

  void perform(file_download d) { get_file(std::move(d)); }

  void perform(file_upload) { // a handler's mistake: only a streamed request takes its body
    send(failure_reply(500, "this endpoint's handler cannot take a body it was given"));
  }

  /// Runs `work` on a worker thread, then `then(result)` back on this session's executor.
  template<class Work, class Then>
  void offload(Work work, Then then) {
    net::post(ctx_.workers, [self = shared_from_this(), work = std::move(work),
                             then = std::move(then)]() mutable {
      auto r = work();
      net::post(
          self->stream_.get_executor(),
          [self, r = std::move(r), then = std::move(then)]() mutable { then(std::move(r)); });
    });
  }

  /// Sends a JSON reply. `close`: the request body may be unread, so the connection ends.
  /// `undo` (if any): run on a worker when the answer cannot be written (the caller has gone).
  void send(reply r, bool close = false, const std::string& allow = {},
            std::shared_ptr<std::function<void()>> undo = nullptr) {
    auto res = std::make_shared<http::response<http::string_body>>(
        static_cast<http::status>(r.status), version_);
    res->set(http::field::content_type, r.content_type);
    if (!allow.empty()) res->set(http::field::allow, allow);
    res->keep_alive(keep_alive_ && !close);
    res->body() = std::move(r.body);
    res->prepare_payload();
    stream_.expires_after(ctx_.options.idle_timeout);
    http::async_write(stream_, *res,
                      [self = shared_from_this(), res, close, undo](error_code ec, size_t) {
                        if (ec && undo) net::post(self->ctx_.workers, [undo] { (*undo)(); });
                        if (ec) return self->shutdown();
                        if (close) return self->linger();
                        if (!res->keep_alive()) return self->shutdown();
                        self->read_header();
                      });
  }

  /// After an early reply the client may still be sending the body: closing now would
  /// reset the connection and lose the reply. So stop sending, discard what arrives
  /// (into a fixed scratch buffer: nothing is kept) until EOF or a short deadline.
  void linger() {
    error_code ignored;
    stream_.socket().shutdown(net::socket_base::shutdown_send, ignored);
    if (!linger_deadline_) linger_deadline_ = steady::now() + std::chrono::seconds{5};
    if (steady::now() >= *linger_deadline_) return shutdown();
    scratch_.resize(16 * 1024);
    stream_.expires_at(*linger_deadline_);
    stream_.async_read_some(net::buffer(scratch_),
                            [self = shared_from_this()](error_code ec, size_t) {
                              if (ec) return self->shutdown();
                              self->linger();
                            });
  }

  void shutdown() {
    error_code ignored;
    stream_.socket().shutdown(net::socket_base::shutdown_both, ignored);
    stream_.socket().close(ignored);
  }

  // ---- exec ----------------------------------------------------------------------------

  void exec(exec_call call) {
    auto started = steady::now();
    offload(std::move(call.start), [self = shared_from_this(), streaming = call.streaming,
                                    started](result<std::unique_ptr<running_exec>> r) {
      if (!r) return self->send(failure_reply(r.error()));
      self->run_exec(std::move(*r), streaming, started);
    });
  }

  void run_exec(std::unique_ptr<running_exec> run, bool streaming, steady::time_point started) {
    streaming_ = streaming;
    gone_ = false;
    exec_finished_ = false;
    exec_pump::emit_fn emit;
    if (streaming)
      emit = [self = shared_from_this()](std::string line, std::function<void()> written) {
        self->enqueue(std::move(line) + "\n", std::move(written));
      };
    pump_ = std::make_shared<exec_pump>(
        stream_.get_executor(), ctx_.workers, std::move(run), ctx_.options.exec, started,
        std::move(emit),
        [self = shared_from_this()](exec_result r) { self->exec_done(std::move(r)); });
    // Out of file descriptors: refused (503) before a 200 promises output the pump
    // could never read; the command is killed and reaped.
    if (auto why = pump_->open()) {
      pump_->abandon();
      pump_.reset();
      return send(failure_reply(fail(ec::unavailable, "exec: " + *why)));
    }
    ctx_.track(pump_);
    stream_.expires_never(); // the command may run for hours; the watch detects a gone client
    if (streaming) {
      auto res = std::make_shared<http::response<http::empty_body>>(http::status::ok, version_);
      res->set(http::field::content_type, "application/x-ndjson");
      res->chunked(true);
      res->keep_alive(keep_alive_);
      auto sr = std::make_shared<http::response_serializer<http::empty_body>>(*res);
      writing_ = true;
      write_started_ = steady::now();
      http::async_write_header(stream_, *sr,
                               [self = shared_from_this(), res, sr](error_code ec, size_t) {
                                 self->writing_ = false;
                                 if (ec) self->lost_client();
                                 self->write_next();
                               });
      heartbeat();
    }
    watch_client();
    pump_->start();
  }

  /// Keeps a read pending on the socket while a command runs: EOF or an error means the
  /// client went away, and the command is killed.
  void watch_client() {
    watching_ = true;
    stream_.async_read_some(
        reader_.buffer().prepare(4096), [self = shared_from_this()](error_code ec, size_t n) {
          self->watching_ = false;
          if (!ec) {
            self->reader_.buffer().commit(n); // a pipelined request: keep it for after the exec
            if (self->reader_.buffer().size() > max_pipelined)
              self->lost_client();
            else if (!self->exec_finished_)
              return self->watch_client();
          } else if (ec != net::error::operation_aborted) {
            self->lost_client();
          }
          if (auto then = std::exchange(self->after_watch_, nullptr)) then();
        });
  }

  /// Ends the watch, then runs `then` (with no operation pending on the socket).
  void stop_watch(std::function<void()> then) {
    exec_finished_ = true;
    if (!watching_) return then();
    after_watch_ = std::move(then);
    error_code ignored;
    stream_.socket().cancel(ignored);
  }

  void lost_client() {
    if (gone_) return;
    gone_ = true;
    if (pump_) pump_->client_gone();
  }

  void heartbeat() {
    hb_.expires_after(ctx_.options.heartbeat);
    hb_.async_wait([self = shared_from_this()](error_code ec) {
      if (ec || self->exec_finished_) return;
      if (self->writing_ &&
          steady::now() - self->write_started_ > self->ctx_.options.write_timeout) {
        self->lost_client(); // the client stopped reading
        error_code ignored;
        self->stream_.socket().close(ignored);
      } else if (!self->writing_ && self->outq_.empty()) {
        self->enqueue(stream_line(exec_stream_line::kind::heartbeat) + "\n", nullptr);
      }
      self->heartbeat();
    });
  }

  struct pending_line {
    std::string data;
    std::function<void()> written;
    bool last = false;
  };

  void enqueue(std::string data, std::function<void()> written, bool last = false) {
    outq_.push_back({std::move(data), std::move(written), last});
    write_next();
  }

  void write_next() {
    if (writing_ || outq_.empty()) return;
    if (gone_) { // nobody reads: tell the producers their lines are done, keep draining
      auto q = std::move(outq_);
      outq_.clear();
      for (auto& l : q)
        if (l.written) l.written();
      return;
    }
    writing_ = true;
    write_started_ = steady::now();
    auto handler = [self = shared_from_this()](error_code ec, size_t) {
      self->writing_ = false;
      auto line = std::move(self->outq_.front());
      self->outq_.pop_front();
      if (ec) self->lost_client();
      if (line.written) line.written();
      self->write_next();
    };
    auto& front = outq_.front();
    if (front.last)
      net::async_write(stream_, http::make_chunk_last(), std::move(handler));
    else
      net::async_write(stream_, http::make_chunk(net::buffer(front.data)), std::move(handler));
  }

  void exec_done(exec_result r) {
    hb_.cancel();
    if (!streaming_) {
      return stop_watch([self = shared_from_this(), r = std::move(r)] {
        self->end_exec();
        if (self->gone_) return self->shutdown();
        if (auto f = exec_failure(r)) return self->send(failure_reply(*f));
        self->send(success_reply(encode(r)));
      });
    }
    if (r.error) enqueue(stream_line(exec_stream_line::kind::error, *r.error) + "\n", nullptr);
    enqueue(stream_line(exec_stream_line::kind::exit_code, {}, r.exit_code, r.exec_ms) + "\n",
            nullptr);
    enqueue(
        {},
        [self = shared_from_this()] {
          self->stop_watch([self] {
            self->end_exec();
            if (self->gone_ || !self->keep_alive_) return self->shutdown();
            self->read_header();
          });
        },
        true);
  }

  void end_exec() {
    pump_.reset();
    outq_.clear();
  }

  // ---- files ---------------------------------------------------------------------------

  void get_file(file_download d) {
    if (d.undo) { // an open that makes something: undone if its caller has gone meanwhile
      auto open = [fd = stream_.socket().native_handle(), open = std::move(d.open),
                   undo = std::move(d.undo)]() -> result<opened_file> {
        auto r = run_for_caller(fd, open, undo);
        if (!r) return fail(ec::unavailable, "the caller has gone");
        return std::move(*r);
      };
      d.open = std::move(open);
    }
    offload(std::move(d.open), [self = shared_from_this()](result<opened_file> r) {
      if (!r) return self->send(failure_reply(r.error()));
      auto sending = std::make_shared<download>();
      sending->file = std::move(r->file);
      sending->size = r->size;
      self->send_file(std::move(sending));
    });
  }

  void send_file(std::shared_ptr<download> d) {
    auto res = std::make_shared<http::response<http::empty_body>>(http::status::ok, version_);
    res->set(http::field::content_type, "application/octet-stream");
    res->content_length(d->size);
    res->keep_alive(keep_alive_);
    auto sr = std::make_shared<http::response_serializer<http::empty_body>>(*res);
    stream_.expires_after(ctx_.options.idle_timeout);
    http::async_write_header(stream_, *sr,
                             [self = shared_from_this(), res, sr, d](error_code ec, size_t) {
                               if (ec) return self->shutdown();
                               self->send_file_chunk(d);
                             });
  }

  void send_file_chunk(std::shared_ptr<download> d) {
    if (d->sent == d->size) {
      d.reset(); // closes the file, ends the activity
      return keep_alive_ ? read_header() : shutdown();
    }
    offload(
        [d]() -> result<bool> {
          d->chunk.resize(std::min<uint64_t>(file_chunk, d->size - d->sent));
          auto n = ::read(d->file.fd.get(), d->chunk.data(), d->chunk.size());
          if (n <= 0) // the file shrank or failed under us: the promised length cannot be kept
            return fail(ec::unavailable, "file changed while being read");
          d->chunk.resize(static_cast<size_t>(n));
          return true;
        },
        [self = shared_from_this(), d](result<bool> r) {
          if (!r) return self->shutdown();
          self->stream_.expires_after(self->ctx_.options.idle_timeout);
          net::async_write(self->stream_, net::buffer(d->chunk),
                           [self, d](error_code ec, size_t) {
                             if (ec) return self->shutdown();
                             d->sent += d->chunk.size();
                             self->send_file_chunk(d);
                           });
        });
  }

  /// A request whose body the handler streams (file_upload): the length cap was checked
  /// before the handler runs (request_reader::judge); anything else the handler answers
  /// closes the connection if the body was not read.
  void streamed_request() {
    auto a = call_handler({});
    auto* up = std::get_if<file_upload>(&a);
    if (!up) {
      if (auto* r = std::get_if<reply>(&a)) return send(std::move(*r), has_body_);
      return send(failure_reply(500, "a streamed request's handler must take its body"), true);
    }
    if (auto len = reader_.head().content_length(); len && *len <= file_chunk) {
      auto small = std::make_shared<file_upload>(std::move(*up));
      if (!reader_.expects_continue() && small->open_with_room)
        return whole_upload(std::move(small), *len);
      return small_upload(std::move(small), *len);
    }
    // A body of known length the guest's disk cannot hold is refused (413) before the file
    // is opened: nothing is created or truncated.
    auto checked_open = [&svc = ctx_.service, id = route_.id, path = up->path,
                         len = reader_.head().content_length(),
                         open = std::move(up->open)]() -> result<guest_file> {
      if (len)
        if (auto room = svc.check_upload_room(id, path, *len); !room) return room.error();
      return open();
    };
    offload(std::move(checked_open),
            [self = shared_from_this(), path = std::move(up->path)](result<guest_file> r) {
              if (!r) return self->send(failure_reply(r.error()), self->has_body_);
              self->receive_file(std::make_shared<guest_file>(std::move(*r)), path);
            });
  }

  /// A body of known length that fits one chunk (a program, a flow): read whole first,
  /// then the file is opened, written and closed in one worker task. Its descriptor lives
  /// only inside that task: uploads waiting for a worker hold none (at 10,000 in flight
  /// they held one each, next to their sockets, and ran the process out of descriptors).
  /// The room check still comes before the body (and before a 100-continue), and a refused
  /// open is answered after it, on a connection that stays usable.
  void small_upload(std::shared_ptr<file_upload> up, uint64_t len) {
    offload([&svc = ctx_.service, id = route_.id, path = up->path,
             len] { return svc.check_upload_room(id, path, len); },
            [self = shared_from_this(), up](result<bool> room) {
              if (!room) return self->send(failure_reply(room.error()), self->has_body_);
              bool cont = self->begin_upload_body();
              self->after_continue(cont, [self, up] { self->read_small(up); });
            });
  }

  /// Such a body whose client waits for no 100-continue (serve's never does): it is on its
  /// way already, so it is read first and the room check, the open and the write are one
  /// worker task, not two with a hop to this thread and back between them. Refused for
  /// room, nothing is created or truncated still, and the connection stays usable (the
  /// body was read).
  void whole_upload(std::shared_ptr<file_upload> up, uint64_t len) {
    begin_upload_body();
    read_small(std::move(up), len);
  }

  /// `room`: the room check is still to be made, in the write's task.
  void read_small(std::shared_ptr<file_upload> up, std::optional<uint64_t> room = {}) {
    if (reader_.upload_done()) return write_small(std::move(up), room);
    if (received_ ==
        reader_.chunk_size()) // more body than its Content-Length: Beast never lets it
      return send(failure_reply(400, "the body is longer than its Content-Length"), true);
    read_deadline();
    reader_.read_upload(received_,
                        [self = shared_from_this(), up, room](error_code ec, size_t n) {
                          self->read_done();
                          if (ec) return self->refuse_request(ec, "body", true);
                          self->received_ += n;
                          self->read_small(up, room);
                        });
  }

  void write_small(std::shared_ptr<file_upload> up, std::optional<uint64_t> room) {
    offload(
        [up, data = reader_.chunk(), n = received_, room]() -> result<bool> {
          auto f = room ? up->open_with_room(*room) : up->open();
          if (!f) return f.error();
          return write_all(f->fd.get(), data, n); // the file closes here, on the worker
        },
        [self = shared_from_this(), up](result<bool> w) {
          if (!w) return self->send(failure_reply(w.error()));
          self->upload_done(nullptr, up->path);
        });
  }

  /// Takes the head over into an upload parser (request_reader::begin_upload). True if
  /// the caller waits for a 100-continue.
  bool begin_upload_body() {
    bool cont = reader_.expects_continue();
    reader_.begin_upload(ctx_.options.max_file_bytes);
    received_ = 0;
    return cont;
  }

  void receive_file(std::shared_ptr<guest_file> f, const std::string& path) {
    bool cont = begin_upload_body();
    after_continue(cont, [self = shared_from_this(), f, path] { self->read_upload(f, path); });
  }

  void read_upload(std::shared_ptr<guest_file> f, const std::string& path) {
    if (reader_.upload_done()) return upload_done(f, path);
    read_deadline();
    reader_.read_upload(0, [self = shared_from_this(), f, path](error_code ec, size_t n) {
      self->read_done();
      if (ec == http::error::body_limit) { // a chunked body grew past the limit
        return self->offload([f] { return result<bool>{::ftruncate(f->fd.get(), 0) == 0}; },
                             [self](result<bool>) {
                               self->send(too_large(0, self->ctx_.options.max_file_bytes),
                                          true);
                             });
      }
      if (ec) return self->refuse_request(ec, "body", true);
      if (n == 0) return self->read_upload(f, path);
      self->offload(
          [f, data = self->reader_.chunk(), n] { return write_all(f->fd.get(), data, n); },
          [self, f, path, n](result<bool> w) {
            if (!w) return self->send(failure_reply(w.error()), true);
            self->received_ += n;
            self->read_upload(f, path);
          });
    });
  }

  void upload_done(std::shared_ptr<guest_file> f, const std::string& path) {
    f.reset(); // closes the file, ends the activity
    reader_.end_upload();
    send(success_reply("{\"path\":" + quote_json(path) +
                       ",\"size\":" + std::to_string(received_) + "}"));
  }

  /// TCP or a Unix socket: Beast's timeouts work on either.
  beast::basic_stream<stream_protocol> stream_;
  request_reader<beast::basic_stream<stream_protocol>> reader_{stream_};
  http_context& ctx_;
  unsigned version_ = 11;
  bool keep_alive_ = true;
  bool has_body_ = false;
  request_target target_;
  route route_;

  // exec
  std::shared_ptr<exec_pump> pump_;
  bool streaming_ = false;
  bool gone_ = false;
  bool exec_finished_ = false;
  bool watching_ = false;
  std::function<void()> after_watch_;
  net::steady_timer hb_;
  net::steady_timer latency_;    ///< simulated domain only (after_latency)
  net::steady_timer read_timer_; ///< a request's header or body must arrive in time
  uint64_t read_gen_ = 0;        ///< which read the timer was armed for
  bool reading_ = false;
  bool read_timed_out_ = false;
  std::deque<pending_line> outq_;
  bool writing_ = false;
  steady::time_point write_started_;

  ingress_cache ingress_cache_; ///< a service URL's upstream connection, kept for the next

  // uploads
  std::vector<char> scratch_;
  std::optional<steady::time_point> linger_deadline_;
  uint64_t received_ = 0;
};

} // namespace

void serve_connection(stream_protocol::socket socket, http_context& ctx) {
  std::make_shared<session>(std::move(socket), ctx)->run();
}

} // namespace guestflow::local
