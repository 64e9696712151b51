// The bridge server's request parsing (bridge/server/connection.cpp), with its limits: one
// request_parser<string_body> per request, header_limit 16 KiB and no body limit while the
// header is read, then a Content-Length over max_body_bytes refused (413) before the body,
// else the body read under body_limit(max_body_bytes); keep-alive requests follow on the
// same buffer. The target goes through the route table (bridge/server/routes.cpp) with the
// bridge's patterns.
//
// Properties: no crash or overread on any bytes; a parsed body never exceeds the cap; an
// accepted Content-Length equals the body's size; a chunked body over the cap is stopped
// with body_limit; route matching is total.

#include "bridge/server/routes.hpp"
#include "bridge/server/server.hpp"
#include "tests/fuzz/http_support.hpp"

#include <limits>

using namespace guestflow;
using namespace guestflow::fuzz;

namespace {

/// connection.cpp's literal (not exposed by any header).
constexpr uint32_t header_limit = 16 * 1024;

const bridge::route_table& routes() {
  static const bridge::route_table table = [] {
    bridge::route_table t;
    bridge::route_handler none = [](bridge::exchange&, bridge::server_context&) {};
    t.add("GET", "/healthz", bridge::endpoint::healthz, none).open = true;
    t.add("GET", "/metrics", bridge::endpoint::metrics, none);
    t.add("GET", "/v1/capabilities", bridge::endpoint::capabilities, none);
    t.add("POST", "/v1/runs", bridge::endpoint::start_run, none);
    t.add("GET", "/v1/runs/{id}/events", bridge::endpoint::run_events, none).query_numbers = {
        "from_seq"};
    t.add("DELETE", "/v1/runs/{id}", bridge::endpoint::cancel_run, none);
    t.add("POST", "/v1/sandbox/run", bridge::endpoint::sandbox_run, none);
    t.add("POST", "/v1/components/run", bridge::endpoint::component_run, none);
    t.add("GET", "/v1/sessions/{id}/files/{op}", bridge::endpoint::metrics, none);
    t.add("PUT", "/v1/sessions/{id}/files/{op}", bridge::endpoint::metrics, none);
    return t;
  }();
  return table;
}

void check_match(std::string_view method, std::string_view target) {
  auto r = routes().match(method, target);
  if (!r) {
    FUZZ_CHECK(r.error().code == ec::bad_request, "route match failed with another code");
    return;
  }
  if (r->kind == bridge::route_match::outcome::found) {
    FUZZ_CHECK(r->target != nullptr, "a found route without a target");
    for (auto& name : {"id", "op"}) {
      auto v = r->params.path(name);
      FUZZ_CHECK(v.size() <= 64, "a path parameter longer than 64");
    }
    (void)r->params.number("from_seq");
  } else if (r->kind == bridge::route_match::outcome::method_not_allowed) {
    FUZZ_CHECK(!r->allow.empty(), "405 without an Allow list");
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto input = as_view(data, size);
  draws d{fingerprint(input)};
  bridge::server_options opts;
  if (d.below(2) == 0) opts.max_body_bytes = d.below(256); // a small cap, reached by inputs
  chunked_stream stream{input, d};
  beast::flat_buffer buf;
  for (int request = 0; request < 16; ++request) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(header_limit);
    parser.body_limit(std::numeric_limits<uint64_t>::max());
    boost::system::error_code ec;
    http::read_header(stream, buf, parser, ec);
    if (ec) return 0; // the server closes (or answers 400/431: the parser's verdict is ec)
    FUZZ_CHECK(parser.is_header_done(), "read_header returned without a header");
    auto& req = parser.get();
    touch_header(req);
    check_match(sv(req.method_string()), sv(req.target()));
    bool keep_alive = req.keep_alive();
    auto limit = opts.max_body_bytes;
    if (auto len = parser.content_length(); len && *len > limit) return 0; // 413, close
    if (!parser.is_done()) {
      parser.body_limit(limit);
      http::read(stream, buf, parser, ec);
      if (ec == http::error::body_limit) {
        FUZZ_CHECK(!parser.content_length() || parser.chunked(),
                   "body_limit hit by a body whose length was checked");
        return 0; // 413, close
      }
      if (ec) return 0;
    }
    FUZZ_CHECK(parser.is_done(), "read returned before the message was done");
    auto& body = parser.get().body();
    FUZZ_CHECK(body.size() <= limit, "a body past max_body_bytes was accepted");
    if (auto len = parser.content_length(); len && !parser.chunked())
      FUZZ_CHECK(*len == body.size(), "the body's size disagrees with Content-Length");
    if (!keep_alive) return 0;
  }
  return 0;
}
