// The local control plane's request parsing (controlplane/local/http/http_session.cpp), with
// its limits (controlplane/local/http/http_options.hpp): the header read into a
// request_parser<empty_body> (header_limit 16 KiB, no body limit yet); then a JSON route's
// parser<string_body> made from it under max_json_bytes, or — for a file upload
// (PUT …/files…) — a parser<buffer_body> under max_file_bytes read in fixed chunks; a
// Content-Length over the cap is refused before the body. Keep-alive requests follow on the
// same buffer.
//
// Properties: no crash or overread on any bytes; no body past its cap; a Content-Length
// body delivered whole; the moved-from-header parser keeps the header.

#include "controlplane/local/http/http_options.hpp"
#include "tests/fuzz/http_support.hpp"

#include <limits>
#include <string>
#include <vector>

using namespace guestflow;
using namespace guestflow::fuzz;

namespace {

/// http_session.cpp's literal (not exposed by any header).
constexpr uint32_t header_limit = 16 * 1024;

bool is_upload(std::string_view method, std::string_view target) {
  return method == "PUT" && target.find("/files") != std::string_view::npos;
}

/// Reads a JSON route's body; false when the connection would close.
template<class Stream>
bool json_body(Stream& stream, beast::flat_buffer& buf,
               http::request_parser<http::empty_body>& head, uint64_t limit) {
  http::request_parser<http::string_body> body{std::move(head)};
  body.body_limit(limit);
  boost::system::error_code ec;
  http::read(stream, buf, body, ec);
  if (ec) return false; // body_limit → 413 and close; anything else closes
  FUZZ_CHECK(body.is_done(), "read returned before the message was done");
  auto& text = body.get().body();
  FUZZ_CHECK(text.size() <= limit, "a JSON body past max_json_bytes was accepted");
  if (auto len = body.content_length(); len && !body.chunked())
    FUZZ_CHECK(*len == text.size(), "the body's size disagrees with Content-Length");
  return true;
}

/// Reads an upload's body in chunks as receive_file/read_upload do.
template<class Stream>
bool upload_body(Stream& stream, beast::flat_buffer& buf,
                 http::request_parser<http::empty_body>& head, uint64_t limit, draws& d) {
  http::request_parser<http::buffer_body> upload{std::move(head)};
  upload.body_limit(limit);
  std::vector<char> chunk(1 + d.below(4096));
  uint64_t received = 0;
  while (!upload.is_done()) {
    auto& body = upload.get().body();
    body.data = chunk.data();
    body.size = chunk.size();
    boost::system::error_code ec;
    http::read(stream, buf, upload, ec);
    if (ec == http::error::need_buffer) ec = {};
    if (ec) return false;
    auto n = chunk.size() - upload.get().body().size;
    received += n;
    FUZZ_CHECK(received <= limit, "an upload past max_file_bytes was accepted");
  }
  if (auto len = upload.content_length(); len && !upload.chunked())
    FUZZ_CHECK(*len == received, "the upload's size disagrees with Content-Length");
  return true;
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
  chunked_stream stream{input, d};
  beast::flat_buffer buf;
  for (int request = 0; request < 16; ++request) {
    http::request_parser<http::empty_body> head;
    head.header_limit(header_limit);
    head.body_limit(std::numeric_limits<uint64_t>::max());
    boost::system::error_code ec;
    http::read_header(stream, buf, head, ec);
    if (ec) return 0;
    FUZZ_CHECK(head.is_header_done(), "read_header returned without a header");
    auto& req = head.get();
    touch_header(req);
    bool keep_alive = req.keep_alive();
    std::string method{sv(req.method_string())};
    std::string target{sv(req.target())};
    bool upload = is_upload(method, target);
    auto limit = upload ? opts.max_file_bytes : opts.max_json_bytes;
    if (auto len = head.content_length(); len && *len > limit) return 0; // 413, close
    bool more =
        upload ? upload_body(stream, buf, head, limit, d) : json_body(stream, buf, head, limit);
    if (!more || !keep_alive) return 0;
  }
  return 0;
}
