// The bridge server's request reading: bridge/server/connection.hpp's request_reader, the
// code connection.cpp runs on its socket, here over a test stream: the header read (16 KiB),
// the framing check (transfer codings), the match against the bridge's route table
// (bridge/server/surfaces: api_routes()), the bearer token, the per-route body cap checked
// on Content-Length before the body, then the body read under body_limit with its room
// reserved and given back; keep-alive requests follow on the same buffer.
//
// Properties: no crash or overread on any bytes; a body is read only for a found route that
// passed the framing, token and length checks; no body past the route's cap; an accepted
// Content-Length equals the body's size; body_limit is hit only by a chunked body; a refused
// framing closes the connection; the body's room is given back; route matching is total.

#include "bridge/server/connection.hpp"
#include "bridge/server/surfaces/surfaces.hpp"
#include "tests/fuzz/http_support.hpp"

using namespace guestflow;
using namespace guestflow::fuzz;
using verdict = bridge::header_verdict;

namespace {

/// The one connection's request cycle up to dispatch, as connection.cpp runs it; false
/// when the connection would close.
bool one_request(peer& p, bridge::request_reader<beast::test::stream>& reader,
                 const bridge::server_options& opts) {
  boost::system::error_code ec;
  reader.read_header([&](boost::system::error_code e) { ec = e; });
  p.run();
  if (ec) return false; // the server answers 400/408/431 or closes: the parser's verdict
  auto& parser = reader.parser();
  FUZZ_CHECK(parser.is_header_done(), "read_header returned without a header");
  touch_header(parser.get());
  bool keep_alive = parser.get().keep_alive();
  auto v = reader.judge(bridge::api_routes(), opts);
  if (v.then == verdict::next::refuse) {
    FUZZ_CHECK(!v.refusal.message.empty(), "a refusal without a message");
    if (v.status == 413)
      FUZZ_CHECK(v.target && parser.content_length() && *parser.content_length() > v.cap,
                 "413 before the body without a length over the cap");
    // An answer before the body closes a connection with one (connection.cpp's respond).
    return !v.close && keep_alive && parser.is_done();
  }
  FUZZ_CHECK(v.target != nullptr, "a request let through without a route");
  FUZZ_CHECK(v.cap == bridge::body_cap(v.target, opts), "the cap is not the route's");
  if (!v.target->open && !opts.token.empty()) {
    auto auth = sv(parser.get()[http::field::authorization]);
    FUZZ_CHECK(auth.size() == 7 + opts.token.size() &&
                   beast::iequals(beast::string_view{auth.data(), 7}, "bearer ") &&
                   auth.substr(7) == opts.token,
               "a request past the token it lacked");
  }
  if (v.then == verdict::next::read_body) {
    reader.read_body(v.cap, [&](boost::system::error_code e) { ec = e; });
    p.run();
    FUZZ_CHECK(room_given_back(reader.buffer()), "the body's room was not given back");
    if (ec == http::error::body_limit) {
      FUZZ_CHECK(!parser.content_length() || parser.chunked(),
                 "body_limit hit by a body whose length was checked");
      return false; // 413, close
    }
    if (ec) return false;
  }
  FUZZ_CHECK(parser.is_done(), "dispatched before the message was done");
  auto& body = parser.get().body();
  FUZZ_CHECK(body.size() <= v.cap, "a body past the route's cap was accepted");
  if (auto len = parser.content_length(); len && !parser.chunked())
    FUZZ_CHECK(*len == body.size(), "the body's size disagrees with Content-Length");
  return keep_alive;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto input = as_view(data, size);
  draws d{fingerprint(input)};
  bridge::server_options opts;
  if (d.below(2) == 0) opts.max_body_bytes = d.below(256); // a small cap, reached by inputs
  if (d.below(4) == 0) opts.token = "fuzz-token";
  peer p{input};
  bridge::request_reader<beast::test::stream> reader{p.stream};
  for (int request = 0; request < 16; ++request) {
    p.cut(d);
    if (!one_request(p, reader, opts)) break;
  }
  return 0;
}
