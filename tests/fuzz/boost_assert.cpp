// Under scripts/fuzz, Boost's assertions (kept: no NDEBUG) go through this handler
// (BOOST_ENABLE_ASSERT_HANDLER on the fuzz targets): every one aborts with its message, as
// the default would, except the known false ones of our Boost below — third-party findings
// that are fixed upstream, listed like ubsan.supp's.

#include <boost/assert.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

/// Beast 1.74, basic_parser::parse_chunk_header: after a final chunk `0\r\n` whose trailer
/// has not arrived whole, the next call may get 3 or 4 bytes, and the code after the
/// assertion handles that (it looks for the end of the trailer and asks for more). Fixed
/// upstream by boostorg/beast#2861 (the assertion is `n >= 3` without a CRLF expected).
bool known_false(const char* expr, const char* file) {
  return std::strcmp(expr, "n >= 5") == 0 &&
         std::strstr(file, "beast/http/impl/basic_parser.ipp");
}

} // namespace

namespace boost {

void assertion_failed(char const* expr, char const* function, char const* file, long line) {
  if (known_false(expr, file)) return;
  std::fprintf(stderr, "%s:%ld: %s: Assertion `%s' failed.\n", file, line, function, expr);
  std::abort();
}

void assertion_failed_msg(char const* expr, char const* msg, char const* function,
                          char const* file, long line) {
  if (known_false(expr, file)) return;
  std::fprintf(stderr, "%s:%ld: %s: Assertion `%s' failed: %s\n", file, line, function, expr,
               msg);
  std::abort();
}

} // namespace boost
