#include "controlplane/forward/http_forward.hpp"

#include "common/text.hpp"

#include <algorithm>

namespace guestflow::forward {

namespace http = boost::beast::http;

namespace {

std::string_view sv(boost::beast::string_view s) {
  return {s.data(), s.size()};
}

bool iequals(std::string_view a, std::string_view b) {
  return boost::beast::iequals(boost::beast::string_view{a.data(), a.size()},
                               boost::beast::string_view{b.data(), b.size()});
}

bool contains_token(std::string_view list, std::string_view token) {
  auto tokens = split(list, ",");
  return std::any_of(tokens.begin(), tokens.end(),
                     [&](const std::string& t) { return iequals(t, token); });
}

/// RFC 9110 7.6.1: Connection, the fields it names, and the hop-by-hop fields every proxy
/// drops. `upgrade` keeps Upgrade and says `Connection: upgrade` again.
void strip_hop_by_hop(http::fields& f, bool upgrade) {
  // Framing stays whatever Connection names: the serializer sends the body by it.
  for (const auto& n : split(sv(f[http::field::connection]), ","))
    if (!iequals(n, "transfer-encoding") && !iequals(n, "content-length") &&
        !iequals(n, "upgrade"))
      f.erase(n);
  for (auto field : {http::field::connection, http::field::keep_alive,
                     http::field::proxy_connection, http::field::proxy_authorization,
                     http::field::proxy_authenticate, http::field::te, http::field::trailer})
    f.erase(field);
  if (upgrade)
    f.set(http::field::connection, "upgrade");
  else
    f.erase(http::field::upgrade);
}

} // namespace

bool wants_upgrade(const http::fields& f) {
  return !f[http::field::upgrade].empty() &&
         contains_token(sv(f[http::field::connection]), "upgrade");
}

std::string without_cookies(std::string_view cookie, const std::vector<std::string>& names) {
  std::string out;
  for (const auto& pair : split(cookie, ";")) {
    auto name = trim(std::string_view{pair}.substr(0, pair.find('=')));
    if (std::any_of(names.begin(), names.end(),
                    [&](const std::string& n) { return name == n; }))
      continue;
    if (!out.empty()) out += "; ";
    out += pair;
  }
  return out;
}

void strip_request_fields(http::fields& f, const forward_settings& o, bool upgrade) {
  strip_hop_by_hop(f, upgrade);
  f.erase(http::field::expect); // a 100-continue is answered by the exchange itself
  for (const auto& name : o.drop_fields)
    f.erase(name);
  if (!o.drop_cookies.empty() && f.count(http::field::cookie)) {
    std::string kept;
    for (auto i = f.find(http::field::cookie); i != f.end() && i->name() == http::field::cookie;
         ++i) {
      auto rest = without_cookies(sv(i->value()), o.drop_cookies);
      if (rest.empty()) continue;
      kept += (kept.empty() ? "" : "; ") + rest;
    }
    f.erase(http::field::cookie);
    if (!kept.empty()) f.set(http::field::cookie, kept);
  }
}

void strip_response_fields(http::fields& f, bool upgrade) {
  strip_hop_by_hop(f, upgrade);
}

} // namespace guestflow::forward
