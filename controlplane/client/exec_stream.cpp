#include "controlplane/client/exec_stream.hpp"

#include "controlplane/client/ndjson_reader.hpp"

#include <atomic>
#include <spdlog/spdlog.h>

namespace guestflow::cp {
namespace {

constexpr size_t max_line = size_t{16} << 20;

/// What the sink and the completion of one stream share (both run on the call's lane thread).
struct stream_state {
  exec_stream_callbacks cbs;
  ndjson_reader reader{max_line};
  std::optional<int32_t> exit_code;
  std::optional<failure> bad_line;
  bool started = false; ///< a 2xx header arrived: the body is the stream
  std::atomic<bool> cancelled{false};
  std::string what;

  void on_line(std::string_view line) {
    if (bad_line) return;
    decode_limits limits;
    limits.max_bytes = max_line + 1;
    auto l = decode<exec_stream_line>(line, limits);
    if (!l) {
      bad_line =
          fail(ec::unavailable,
               what + ": control plane sent a malformed stream line: " + l.error().message);
      return;
    }
    if (l->type == exec_stream_line::kind::exit_code) exit_code = l->exit_code;
    if (!cbs.on_line) return;
    try {
      cbs.on_line(std::move(*l));
    } catch (const std::exception& e) {
      spdlog::error("{}: on_line callback threw: {}", what, e.what());
    } catch (...) {
      spdlog::error("{}: on_line callback threw", what);
    }
  }

  std::optional<failure> feed(std::string_view bytes) {
    started = true;
    if (!reader.feed(bytes, [this](std::string_view l) { on_line(l); }))
      return fail(ec::unavailable, what + ": a stream line is longer than " +
                                       std::to_string(max_line) + " bytes");
    return bad_line;
  }

  result<int32_t> outcome(result<std::string> r) {
    if (cancelled) return fail(ec::transient, "cancelled");
    if (r) {
      // The body ended cleanly: an unterminated last line still counts.
      if (!reader.finish([this](std::string_view l) { on_line(l); }))
        return fail(ec::unavailable, what + ": a stream line is longer than " +
                                         std::to_string(max_line) + " bytes");
      if (bad_line) return *bad_line;
    }
    // Once the exit code arrived, the command's outcome is known whatever happens next.
    if (exit_code) return *exit_code;
    if (!r) {
      if (started && r.error().code == ec::transient)
        return fail(ec::transient, "stream ended without exit code: " + r.error().message);
      return std::move(r).error();
    }
    return fail(ec::transient, "stream ended without exit code");
  }
};

class handle final : public stream_handle {
public:
  handle(std::shared_ptr<stream_state> st, std::weak_ptr<http_call> call)
      : st_(std::move(st))
      , call_(std::move(call)) {}

  void cancel() override {
    st_->cancelled = true;
    if (auto c = call_.lock()) c->abort(fail(ec::transient, "cancelled"));
  }

private:
  std::shared_ptr<stream_state> st_;
  std::weak_ptr<http_call> call_;
};

class no_stream final : public stream_handle {
public:
  void cancel() override {}
};

} // namespace

std::shared_ptr<stream_handle> finished_stream() {
  return std::make_shared<no_stream>();
}

std::shared_ptr<stream_handle> start_exec_stream(std::shared_ptr<transport> t, call_spec spec,
                                                 exec_stream_callbacks cbs) {
  auto st = std::make_shared<stream_state>();
  st->cbs = std::move(cbs);
  st->what = spec.what();
  auto sink = [st](std::string_view bytes) { return st->feed(bytes); };
  auto done = [st](result<std::string> r) {
    auto out = st->outcome(std::move(r));
    auto on_done = std::move(st->cbs.on_done);
    st->cbs.on_line = nullptr;
    if (on_done) on_done(std::move(out));
  };
  auto call = http_call::start(std::move(t), std::move(spec), std::move(done), std::move(sink));
  return std::make_shared<handle>(std::move(st), call);
}

} // namespace guestflow::cp
