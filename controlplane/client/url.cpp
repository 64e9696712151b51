#include "controlplane/client/url.hpp"

#include "common/numbers.hpp"
#include "common/text.hpp"

#include <algorithm>
#include <boost/asio/ip/address.hpp>

namespace guestflow::cp {
namespace {

bool ascii_alnum(unsigned char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

failure bad_url(std::string_view text, std::string_view why) {
  return fail(ec::bad_request,
              "control-plane URL '" + std::string(text) + "': " + std::string(why));
}

} // namespace

std::string base_url::origin() const {
  if (!socket_path.empty()) return "unix://" + socket_path;
  return std::string(tls ? "https://" : "http://") + host_header;
}

result<base_url> parse_base_url(std::string_view text) {
  base_url u;
  auto scheme_end = text.find("://");
  if (scheme_end == std::string_view::npos)
    return bad_url(text, "expected http://host[:port], https://host[:port] or unix:///path");
  auto scheme = lower(text.substr(0, scheme_end));
  auto rest = text.substr(scheme_end + 3);
  if (scheme == "unix") {
    // sun_path holds 108 bytes with the terminating NUL.
    if (rest.empty() || rest.front() != '/')
      return bad_url(text, "a Unix socket path must be absolute (unix:///run/cp.sock)");
    if (rest.size() > 107) return bad_url(text, "a Unix socket path must be at most 107 bytes");
    for (unsigned char c : rest)
      if (c < 0x20 || c == 0x7f || c == '?' || c == '#')
        return bad_url(text, "the socket path must be printable, without query or fragment");
    u.socket_path = std::string(rest);
    u.host = "localhost";
    u.host_header = "localhost";
    return u;
  }
  if (scheme == "https")
    u.tls = true;
  else if (scheme != "http")
    return bad_url(text, "scheme must be http, https or unix");
  if (rest.find_first_of("?#") != std::string_view::npos)
    return bad_url(text, "query and fragment are not allowed");
  auto slash = rest.find('/');
  auto authority = rest.substr(0, slash);
  auto path = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash);
  if (authority.find('@') != std::string_view::npos)
    return bad_url(text, "user info is not allowed (use the API key setting)");
  std::string_view host_part;
  std::string_view port_part;
  if (!authority.empty() && authority.front() == '[') {
    auto close = authority.find(']');
    if (close == std::string_view::npos) return bad_url(text, "unterminated IPv6 literal");
    host_part = authority.substr(1, close - 1);
    auto after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':')
        return bad_url(text, "unexpected characters after IPv6 literal");
      port_part = after.substr(1);
      if (port_part.empty()) return bad_url(text, "empty port");
    }
    boost::system::error_code err;
    auto addr = boost::asio::ip::make_address_v6(std::string(host_part), err);
    if (err || addr.scope_id() != 0) return bad_url(text, "invalid IPv6 literal");
  } else {
    auto colon = authority.find(':');
    host_part = authority.substr(0, colon);
    if (colon != std::string_view::npos) {
      port_part = authority.substr(colon + 1);
      if (port_part.empty()) return bad_url(text, "empty port");
    }
    for (unsigned char c : host_part)
      if (!(ascii_alnum(c) || c == '-' || c == '.' || c == '_'))
        return bad_url(text, "invalid character in host name");
  }
  if (host_part.empty()) return bad_url(text, "empty host");
  u.host = lower(host_part);
  u.port = u.tls ? 443 : 80;
  if (!port_part.empty()) {
    if (port_part.size() > 5 ||
        !std::all_of(port_part.begin(), port_part.end(),
                     [](unsigned char c) { return c >= '0' && c <= '9'; }))
      return bad_url(text, "port must be a number 1-65535");
    auto port = parse_uint_as<uint16_t>(port_part, 1);
    if (!port) return bad_url(text, "port must be a number 1-65535");
    u.port = *port;
  }
  while (!path.empty() && path.back() == '/')
    path.remove_suffix(1);
  for (unsigned char c : path)
    if (c <= 0x20 || c >= 0x7f)
      return bad_url(text, "path prefix must be printable ASCII without spaces");
  u.prefix = std::string(path);
  bool v6 = u.host.find(':') != std::string::npos;
  u.host_header = v6 ? "[" + u.host + "]" : u.host;
  if (u.port != (u.tls ? 443 : 80)) u.host_header += ":" + std::to_string(u.port);
  return u;
}

bool is_ip_literal(std::string_view host) {
  boost::system::error_code err;
  boost::asio::ip::make_address(std::string(host), err);
  return !err;
}

bool is_loopback_host(std::string_view host) {
  auto h = lower(host);
  if (h == "localhost" || h == "localhost.") return true;
  boost::system::error_code err;
  auto addr = boost::asio::ip::make_address(h, err);
  return !err && is_loopback_address(addr);
}

bool is_loopback_address(const boost::asio::ip::address& a) {
  namespace ip = boost::asio::ip;
  if (a.is_v4()) return a.to_v4().to_bytes()[0] == 127;
  auto v6 = a.to_v6();
  return v6.is_loopback() ||
         (v6.is_v4_mapped() && ip::make_address_v4(ip::v4_mapped, v6).to_bytes()[0] == 127);
}

std::string percent_encode(std::string_view s, bool keep_slash) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (ascii_alnum(c) || c == '-' || c == '.' || c == '_' || c == '~' ||
        (keep_slash && c == '/')) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 0xf]);
    }
  }
  return out;
}

} // namespace guestflow::cp
