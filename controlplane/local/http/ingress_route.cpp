#include "controlplane/local/http/ingress_route.hpp"

#include "common/numbers.hpp"
#include "common/text.hpp"
#include "controlplane/local/http/routes.hpp"

#include <algorithm>

namespace guestflow::local {
namespace {

bool id_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '-' || c == '_' || c == '.';
}

bool valid_id(std::string_view id) {
  return !id.empty() && id.size() <= 128 && std::all_of(id.begin(), id.end(), id_char);
}

result<uint16_t> port_of(std::string_view text) {
  auto p = parse_uint(text, 1, 65535);
  if (!p)
    return fail(ec::bad_request, "port: expected 1 to 65535, got '" + std::string{text} + "'");
  return static_cast<uint16_t>(*p);
}

/// `query` (no '?') without its `token` parameters; the last one's decoded value kept.
result<std::string> without_token(std::string_view query, std::optional<std::string>& token) {
  std::string kept;
  for (const auto& part : split(query, "&")) {
    auto eq = part.find('=');
    if (std::string_view{part}.substr(0, eq) == "token") {
      auto value = url_decode(
          eq == std::string::npos ? "" : std::string_view{part}.substr(eq + 1), true);
      if (!value) return value.error();
      token = std::move(*value);
      continue;
    }
    kept += (kept.empty() ? "" : "&") + part;
  }
  return kept;
}

/// `rest` (from the first '/' after the port on, or empty) + `query` → the upstream target.
result<ingress_request> finish(ingress_request r, std::string_view rest, std::string_view query,
                               bool has_query) {
  r.upstream_target = rest.empty() ? "/" : std::string{rest};
  if (has_query) {
    auto kept = without_token(query, r.query_token);
    if (!kept) return kept.error();
    if (!kept->empty()) r.upstream_target += "?" + *kept;
  }
  return r;
}

} // namespace

std::optional<result<ingress_request>>
match_ingress(std::string_view raw_target, std::string_view host, std::string_view domain) {
  auto q = raw_target.find('?');
  auto path = raw_target.substr(0, q);
  bool has_query = q != std::string_view::npos;
  auto query = has_query ? raw_target.substr(q + 1) : std::string_view{};

  // Host mode: {port}-{id}.{domain}, the whole path the app's.
  if (!domain.empty()) {
    auto name = host.substr(0, host.rfind(':') == std::string_view::npos || host.back() == ']'
                                   ? host.size()
                                   : host.rfind(':'));
    auto suffix = "." + lower(domain);
    auto lname = lower(name);
    if (lname.size() > suffix.size() &&
        lname.compare(lname.size() - suffix.size(), suffix.size(), suffix) == 0) {
      std::string_view label{lname.data(), lname.size() - suffix.size()};
      auto dash = label.find('-');
      if (dash == std::string_view::npos || label.find('.') != std::string_view::npos)
        return std::nullopt;
      auto port = port_of(label.substr(0, dash));
      if (!port) return result<ingress_request>{port.error()};
      ingress_request r;
      r.id = std::string{name.substr(dash + 1, label.size() - dash - 1)};
      if (!valid_id(r.id)) return std::nullopt;
      r.port = *port;
      return finish(std::move(r), path, query, has_query);
    }
  }

  // Path mode: /v1/sandboxes/{id}/ports/{port}[/rest]
  constexpr std::string_view base = "/v1/sandboxes/";
  if (path.substr(0, base.size()) != base) return std::nullopt;
  auto after = path.substr(base.size());
  auto slash = after.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  auto id = after.substr(0, slash);
  constexpr std::string_view ports = "/ports/";
  if (after.substr(slash, ports.size()) != ports || !valid_id(id)) return std::nullopt;
  auto tail = after.substr(slash + ports.size());
  auto end = tail.find('/');
  auto port = port_of(tail.substr(0, end));
  if (!port) return result<ingress_request>{port.error()};
  ingress_request r;
  r.id = std::string{id};
  r.port = *port;
  r.prefix = std::string{base} + r.id + "/ports/" + std::to_string(r.port);
  r.needs_slash = end == std::string_view::npos;
  return finish(std::move(r), r.needs_slash ? "" : tail.substr(end), query, has_query);
}

std::optional<std::string> offered_token(std::string_view header,
                                         const std::optional<std::string>& query_token,
                                         std::string_view cookie_field) {
  if (!header.empty()) return std::string{header};
  if (query_token) return query_token;
  for (const auto& pair : split(cookie_field, ";")) {
    auto eq = pair.find('=');
    if (eq != std::string::npos && trim(std::string_view{pair}.substr(0, eq)) == ingress_cookie)
      return std::string{trim(std::string_view{pair}.substr(eq + 1))};
  }
  return std::nullopt;
}

std::string ingress_cookie_for(const ingress_request& r, const std::string& token) {
  return std::string{ingress_cookie} + "=" + token +
         "; HttpOnly; SameSite=Lax; Path=" + (r.prefix.empty() ? std::string{"/"} : r.prefix);
}

} // namespace guestflow::local
