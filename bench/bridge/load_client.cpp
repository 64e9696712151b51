#include "bench/bridge/load_client.hpp"

#include "common/numbers.hpp"
#include "messages/run.hpp"

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <future>
#include <optional>
#include <pthread.h>
#include <thread>
#include <time.h>

namespace guestflow::bench {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;

namespace {

constexpr uint64_t body_limit = uint64_t{64} << 20; ///< one run's whole NDJSON answer

/// What every connection of a level shares (touched on the I/O thread only).
struct shared_state {
  load_target target;
  steady::time_point stop_at;
  http::request<http::string_body> request;
  std::vector<run_record> runs;
  size_t busy = 0; ///< connections not yet closed for good
};

/// `{"error":{"code":"X",…}}` → X (the API's error answer), else "?".
std::string error_code_of(const std::string& body) {
  const std::string key = "\"code\":\"";
  auto at = body.find(key);
  if (at == std::string::npos) return "?";
  auto from = at + key.size();
  auto to = body.find('"', from);
  return to == std::string::npos ? "?" : body.substr(from, to - from);
}

class connection : public std::enable_shared_from_this<connection> {
public:
  connection(net::io_context& io, shared_state& s)
      : s_(s)
      , stream_(io)
      , retry_(io) {}

  void start() {
    ++s_.busy;
    connect();
  }

private:
  void connect() {
    if (steady::now() >= s_.stop_at) return close_for_good();
    stream_.expires_after(s_.target.op_timeout);
    stream_.async_connect(tcp::endpoint{net::ip::make_address_v4("127.0.0.1"), s_.target.port},
                          [self = shared_from_this()](error_code ec) {
                            if (ec) return self->transport_failure("connect", ec);
                            self->send();
                          });
  }

  void send() {
    if (steady::now() >= s_.stop_at) return close_for_good();
    run_ = run_record{};
    run_.start = steady::now();
    next_seq_ = 0;
    terminal_ = false;
    run_id_.clear();
    stream_.expires_after(s_.target.op_timeout);
    http::async_write(stream_, s_.request, [self = shared_from_this()](error_code ec, size_t) {
      if (ec) return self->transport_failure("write", ec);
      self->read_header();
    });
  }

  void read_header() {
    parser_.emplace();
    parser_->body_limit(body_limit);
    stream_.expires_after(s_.target.op_timeout);
    http::async_read_header(stream_, buf_, *parser_,
                            [self = shared_from_this()](error_code ec, size_t) {
                              if (ec) return self->transport_failure("read header", ec);
                              self->on_header();
                            });
  }

  void on_header() {
    auto& res = parser_->get();
    run_.status = res.result_int();
    if (run_.status != 200) {
      // An error answer: a whole (small) JSON body.
      stream_.expires_after(s_.target.op_timeout);
      return http::async_read(stream_, buf_, *parser_,
                              [self = shared_from_this()](error_code ec, size_t) {
                                if (ec) return self->transport_failure("read error body", ec);
                                self->on_refusal();
                              });
    }
    run_id_ = std::string{res["X-Guestflow-Run-Id"]};
    if (run_id_.empty()) violation("200 without an X-Guestflow-Run-Id header");
    if (res[http::field::content_type].find("application/x-ndjson") == beast::string_view::npos)
      violation("200 with Content-Type '" + std::string{res[http::field::content_type]} + "'");
    read_body();
  }

  void on_refusal() {
    auto& res = parser_->get();
    run_.end = steady::now();
    run_.error = "http " + std::to_string(run_.status) + " " + error_code_of(res.body());
    unsigned wait_s = 0;
    if (run_.status == 429) {
      // Honour Retry-After as a real client would: no busy loop of refusals.
      auto ra = res[http::field::retry_after];
      wait_s = std::min(parse_uint_as<unsigned>({ra.data(), ra.size()}).value_or(1), 10u);
    }
    bool keep = parser_->keep_alive();
    record();
    if (wait_s == 0) return keep ? send() : reconnect();
    retry_.expires_after(std::chrono::seconds{wait_s});
    retry_.async_wait([self = shared_from_this(), keep](error_code) {
      keep ? self->send() : self->reconnect();
    });
  }

  void read_body() {
    stream_.expires_after(s_.target.op_timeout);
    http::async_read_some(stream_, buf_, *parser_,
                          [self = shared_from_this()](error_code ec, size_t) {
                            if (ec) return self->transport_failure("read stream", ec);
                            self->on_body();
                          });
  }

  void on_body() {
    auto& body = parser_->get().body();
    size_t from = 0;
    for (auto nl = body.find('\n'); nl != std::string::npos; nl = body.find('\n', from)) {
      on_event(std::string_view{body}.substr(from, nl - from));
      from = nl + 1;
    }
    body.erase(0, from); // the parser appends at the body's current end
    if (!parser_->is_done()) return read_body();
    if (!body.empty()) violation("the stream ended inside a line");
    if (!terminal_) violation("the stream ended without a terminal event");
    if (s_.target.expected_events && run_.error.empty() &&
        run_.events != s_.target.expected_events)
      violation("complete after " + std::to_string(run_.events) + " events, expected " +
                std::to_string(s_.target.expected_events));
    bool keep = parser_->keep_alive();
    if (!terminal_) run_.end = steady::now();
    record();
    keep ? send() : reconnect();
  }

  void on_event(std::string_view line) {
    auto ev = decode<run_event>(line);
    if (!ev) return violation("an undecodable event line: " + ev.error().message);
    if (terminal_) return violation("an event after the terminal one");
    if (ev->run_id != run_id_)
      violation("event run_id '" + ev->run_id + "' is not the header's '" + run_id_ + "'");
    if (ev->seq != next_seq_)
      violation("seq " + std::to_string(ev->seq) + " where " + std::to_string(next_seq_) +
                " was due");
    next_seq_ = ev->seq + 1;
    if (run_.events++ == 0) run_.first = steady::now();
    if (!ev->terminal()) return;
    terminal_ = true;
    run_.end = steady::now();
    if (ev->type == run_event::kind::error && run_.error.empty())
      run_.error =
          "event error " + std::string{to_string(ev->code)} + ": " + ev->message.substr(0, 160);
  }

  /// The first contract breach of a run decides its error.
  void violation(std::string what) {
    if (!run_.protocol_violation) run_.error = "protocol: " + std::move(what);
    run_.protocol_violation = true;
  }

  void record() { s_.runs.push_back(std::move(run_)); }

  void transport_failure(const char* during, error_code ec) {
    run_.end = steady::now();
    if (run_.start == steady::time_point{}) run_.start = run_.end;
    run_.error = std::string{"transport: "} + during + ": " + ec.message();
    record();
    // Back off a little so that a dead server is not hammered by reconnects.
    retry_.expires_after(std::chrono::milliseconds{100});
    retry_.async_wait([self = shared_from_this()](error_code) { self->reconnect(); });
  }

  void reconnect() {
    error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
    buf_.clear();
    connect();
  }

  void close_for_good() {
    error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
    --s_.busy;
  }

  shared_state& s_;
  beast::tcp_stream stream_;
  net::steady_timer retry_;
  beast::flat_buffer buf_;
  std::optional<http::response_parser<http::string_body>> parser_;
  run_record run_;
  std::string run_id_;
  uint64_t next_seq_ = 0;
  bool terminal_ = false;
};

} // namespace

struct load_generator::impl {
  net::io_context io{1};
  shared_state state;
  std::thread thread;
  std::promise<void> ran_out;
  std::future<void> ran_out_future = ran_out.get_future();
};

load_generator::load_generator(load_target target, size_t streams, steady::time_point stop_at)
    : impl_(std::make_unique<impl>()) {
  auto& s = impl_->state;
  s.stop_at = stop_at;
  s.request.method(http::verb::post);
  s.request.target("/v1/runs");
  s.request.version(11);
  s.request.set(http::field::host, "127.0.0.1:" + std::to_string(target.port));
  s.request.set(http::field::content_type, "application/json");
  s.request.set(http::field::accept, "application/x-ndjson");
  s.request.keep_alive(true);
  s.request.body() = target.body;
  s.request.prepare_payload();
  s.target = std::move(target);
  for (size_t i = 0; i < streams; ++i)
    std::make_shared<connection>(impl_->io, s)->start();
  impl_->thread = std::thread{[m = impl_.get()] {
    m->io.run();
    m->ran_out.set_value();
  }};
}

load_generator::~load_generator() {
  if (impl_->thread.joinable()) {
    impl_->io.stop();
    impl_->thread.join();
  }
}

load_result load_generator::finish(std::chrono::seconds drain) {
  load_result out;
  if (impl_->ran_out_future.wait_for(drain) != std::future_status::ready) impl_->io.stop();
  impl_->thread.join();
  out.unfinished = impl_->state.busy;
  out.runs = std::move(impl_->state.runs);
  return out;
}

double load_generator::io_thread_cpu_seconds() const {
  clockid_t cid;
  timespec ts{};
  if (::pthread_getcpuclockid(impl_->thread.native_handle(), &cid) != 0 ||
      ::clock_gettime(cid, &ts) != 0)
    return 0;
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

} // namespace guestflow::bench
