// The local control plane's request reading: controlplane/local/http/request_reader.hpp,
// the code http_session.cpp runs on its socket, here over a test stream: the header read
// (16 KiB), the framing check (transfer codings), the API key, the target's decoding and
// the wire API's route table, the per-route cap (max_json_bytes, or max_file_bytes for a
// streamed upload) checked on Content-Length before the body, then a JSON body read whole
// in room made for it and given back, or an upload read as the session reads it: a body of
// known length up to one chunk into one buffer (read_small), anything else chunk by chunk
// (read_upload). Keep-alive requests follow on the same buffer.
//
// Properties: no crash or overread on any bytes; a body is read only for a found route
// past the framing, key and length checks; no body past its route's cap; a Content-Length
// body delivered whole; body_limit only for a chunked body; refused framing closes; the
// body's room is given back; the moved-from-header parsers keep the header.

#include "controlplane/local/http/request_reader.hpp"
#include "tests/fuzz/http_support.hpp"

#include <string>

using namespace guestflow;
using namespace guestflow::fuzz;
using verdict = local::header_verdict;
using reader_type = local::request_reader<beast::test::stream>;

namespace {

/// A JSON route's body; false when the connection would close.
bool json_body(peer& p, reader_type& reader, const verdict& v) {
  boost::system::error_code ec;
  reader.read_json(v.cap, [&](boost::system::error_code e) { ec = e; });
  p.run();
  FUZZ_CHECK(room_given_back(reader.buffer()), "the JSON body's room was not given back");
  if (ec) return false; // body_limit → 413 and close; anything else closes
  auto text = reader.json_body();
  FUZZ_CHECK(text.size() <= v.cap, "a JSON body past max_json_bytes was accepted");
  return true;
}

/// An upload's body as read_small (one buffer of its Content-Length) or read_upload (chunk
/// after chunk, each written away) read it; false when the connection would close.
bool upload_body(peer& p, reader_type& reader, const verdict& v) {
  auto len = reader.head().content_length();
  bool small = len && *len <= local::file_chunk;
  reader.begin_upload(v.cap);
  FUZZ_CHECK(reader.upload().is_header_done(), "the upload parser lost the header");
  uint64_t received = 0;
  while (!reader.upload_done()) {
    size_t offset = small ? static_cast<size_t>(received) : 0;
    if (small && offset == reader.chunk_size()) return false; // 400: longer than its length
    boost::system::error_code ec;
    size_t n = 0;
    reader.read_upload(offset, [&](boost::system::error_code e, size_t got) {
      ec = e;
      n = got;
    });
    p.run();
    if (ec == http::error::body_limit) {
      FUZZ_CHECK(!len || reader.upload().chunked(),
                 "body_limit hit by an upload whose length was checked");
      return false;
    }
    if (ec) return false;
    FUZZ_CHECK(n <= reader.chunk_size() - offset, "a read past the upload's buffer");
    received += n;
    FUZZ_CHECK(received <= v.cap, "an upload past max_file_bytes was accepted");
  }
  if (len && !reader.upload().chunked())
    FUZZ_CHECK(*len == received, "the upload's size disagrees with Content-Length");
  reader.end_upload();
  FUZZ_CHECK(room_given_back(reader.buffer()), "the upload's room was not given back");
  return true;
}

/// One request up to its handler, as http_session.cpp reads it; false when the connection
/// would close.
bool one_request(peer& p, reader_type& reader, const local::http_options& opts) {
  boost::system::error_code ec;
  reader.read_header([&](boost::system::error_code e) { ec = e; });
  p.run();
  if (ec) return false; // 400/408/431 or a close
  auto& head = reader.head();
  FUZZ_CHECK(head.is_header_done(), "read_header returned without a header");
  touch_header(head.get());
  bool keep_alive = head.get().keep_alive();
  auto v = reader.judge(opts);
  if (v.then == verdict::next::refuse) {
    FUZZ_CHECK(v.refusal.status >= 400 && !v.refusal.body.empty(),
               "a refusal without an answer");
    if (v.has_body)
      FUZZ_CHECK(v.close, "an early answer left a body unread on a live connection");
    return !v.close && keep_alive;
  }
  FUZZ_CHECK(v.matched.kind == local::route::outcome::found && v.matched.target,
             "a request let through without a route");
  bool streamed = v.then == verdict::next::streamed;
  FUZZ_CHECK(v.cap == (streamed ? opts.max_file_bytes : opts.max_json_bytes),
             "the cap is not the route's");
  if (auto len = head.content_length(); len) FUZZ_CHECK(*len <= v.cap, "a length over the cap");
  bool more = streamed ? upload_body(p, reader, v) : json_body(p, reader, v);
  return more && keep_alive;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto input = as_view(data, size);
  draws d{fingerprint(input)};
  local::http_options opts;
  if (d.below(2) == 0) { // small caps, reached by inputs
    opts.max_json_bytes = d.below(256);
    opts.max_file_bytes = d.below(1024);
  }
  if (d.below(4) == 0) opts.api_key = "fuzz-key";
  peer p{input};
  reader_type reader{p.stream};
  for (int request = 0; request < 16; ++request) {
    p.cut(d);
    if (!one_request(p, reader, opts)) break;
  }
  return 0;
}
