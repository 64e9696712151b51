#include "common/net_address.hpp"

#include "common/numbers.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

namespace guestflow {

std::string net_address::url_host() const {
  return v6 ? "[" + host + "]" : host;
}

std::string net_address::to_string() const {
  return url_host() + ":" + std::to_string(port);
}

std::optional<net_address> make_net_address(std::string_view ip, uint16_t port) {
  net_address out;
  out.port = port;
  char text[INET6_ADDRSTRLEN];
  auto scope_at = ip.find('%');
  std::string literal{ip.substr(0, scope_at)};
  in_addr v4{};
  in6_addr v6{};
  if (scope_at == std::string_view::npos && ::inet_pton(AF_INET, literal.c_str(), &v4) == 1) {
    if (::inet_ntop(AF_INET, &v4, text, sizeof text) == nullptr) return std::nullopt;
    out.host = text;
    out.loopback = (ntohl(v4.s_addr) & 0xFF000000u) == 0x7F000000u;
    return out;
  }
  if (::inet_pton(AF_INET6, literal.c_str(), &v6) != 1) return std::nullopt;
  if (scope_at != std::string_view::npos && scope_at + 1 == ip.size()) return std::nullopt;
  if (::inet_ntop(AF_INET6, &v6, text, sizeof text) == nullptr) return std::nullopt;
  out.host = text;
  if (scope_at != std::string_view::npos) out.host += ip.substr(scope_at);
  out.v6 = true;
  out.loopback = IN6_IS_ADDR_LOOPBACK(&v6);
  return out;
}

std::optional<net_address> parse_host_port(std::string_view text, std::string* why) {
  auto refuse = [why](std::string message) -> std::optional<net_address> {
    if (why) *why = std::move(message);
    return std::nullopt;
  };
  auto colon = text.rfind(':');
  if (colon == std::string_view::npos)
    return refuse("expected HOST:PORT, got '" + std::string{text} + "'");
  auto host = text.substr(0, colon);
  auto port_text = text.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  if (host == "localhost") host = "127.0.0.1";
  auto port = parse_uint_as<uint16_t>(port_text);
  if (!port) return refuse("bad port '" + std::string{port_text} + "'");
  auto address = make_net_address(host, *port);
  if (!address) return refuse("'" + std::string{host} + "' is not an IP address");
  return address;
}

} // namespace guestflow
