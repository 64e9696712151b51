#include "bridge/server/routes.hpp"

#include "common/numbers.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace guestflow::bridge {

namespace {

/// The segments of a path or pattern between its slashes ("/a/b" → "", "a", "b"); empty
/// segments are kept, so "/v1/runs/" and "/v1/runs" differ.
std::vector<std::string_view> segments(std::string_view path) {
  std::vector<std::string_view> out;
  for (;;) {
    auto slash = path.find('/');
    out.push_back(path.substr(0, slash));
    if (slash == std::string_view::npos) return out;
    path.remove_prefix(slash + 1);
  }
}

bool is_param(std::string_view segment) {
  return segment.size() > 2 && segment.front() == '{' && segment.back() == '}';
}

/// What a `{name}` segment takes: run ids are the coordinator's own ([0-9a-z-]); anything
/// else names nothing (and keeps `..`, `%2F` and the like out of every handler).
bool plausible_segment(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
          c == '-' || c == '_'))
      return false;
  return true;
}

/// Whether `path` fits `pattern`; the `{name}` segments it read go to `params`.
bool fits(std::string_view pattern, const std::vector<std::string_view>& path,
          std::vector<std::pair<std::string, std::string>>* params) {
  auto want = segments(pattern);
  if (want.size() != path.size()) return false;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!is_param(want[i])) {
      if (want[i] != path[i]) return false;
      continue;
    }
    if (!plausible_segment(path[i])) return false;
    if (params)
      params->emplace_back(std::string{want[i].substr(1, want[i].size() - 2)},
                           std::string{path[i]});
  }
  return true;
}

/// The first `name=N` of the query (other parameters are ignored, as HTTP APIs do).
result<uint64_t> query_number(std::string_view query, std::string_view name) {
  while (!query.empty()) {
    auto amp = query.find('&');
    auto param = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    if (param.size() <= name.size() || param.compare(0, name.size(), name) != 0 ||
        param[name.size()] != '=')
      continue;
    auto digits = param.substr(name.size() + 1);
    if (auto n = parse_uint(digits)) return *n;
    return fail(ec::bad_request,
                uint_refusal(name, digits, 0, std::numeric_limits<uint64_t>::max()));
  }
  return uint64_t{0};
}

/// The first `name=…` of the query, percent-decoded to bytes (any byte, NUL refused).
result<std::optional<std::string>> query_text(std::string_view query, std::string_view name) {
  while (!query.empty()) {
    auto amp = query.find('&');
    auto param = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    if (param.size() < name.size() + 1 || param.compare(0, name.size(), name) != 0 ||
        param[name.size()] != '=')
      continue;
    auto raw = param.substr(name.size() + 1);
    std::string out;
    out.reserve(raw.size());
    auto hex = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] == '+') {
        out.push_back(' ');
      } else if (raw[i] != '%') {
        out.push_back(raw[i]);
      } else {
        auto hi = i + 2 < raw.size() ? hex(raw[i + 1]) : -1;
        auto lo = i + 2 < raw.size() ? hex(raw[i + 2]) : -1;
        if (hi < 0 || lo < 0)
          return fail(ec::bad_request, "query " + std::string{name} + ": malformed %-escape");
        auto byte = static_cast<char>(hi * 16 + lo);
        if (byte == '\0')
          return fail(ec::bad_request, "query " + std::string{name} + ": NUL byte");
        out.push_back(byte);
        i += 2;
      }
    }
    return std::optional<std::string>{std::move(out)};
  }
  return std::optional<std::string>{};
}

} // namespace

std::optional<std::string> route_params::text(std::string_view name) const {
  for (auto& [k, v] : texts_)
    if (k == name) return v;
  return std::nullopt;
}

std::string_view route_params::path(std::string_view name) const noexcept {
  for (auto& [k, v] : path_)
    if (k == name) return v;
  return {};
}

uint64_t route_params::number(std::string_view name) const noexcept {
  for (auto& [k, v] : numbers_)
    if (k == name) return v;
  return 0;
}

route& route_table::add(std::string method, std::string pattern, endpoint ep,
                        route_handler handler) {
  for (auto& r : routes_)
    if (r.method == method && r.pattern == pattern)
      throw std::logic_error("route registered twice: " + method + " " + pattern);
  route r;
  r.method = std::move(method);
  r.pattern = std::move(pattern);
  r.ep = ep;
  r.handler = std::move(handler);
  routes_.push_back(std::move(r));
  return routes_.back();
}

result<route_match> route_table::match(std::string_view method, std::string_view target) const {
  auto q = target.find('?');
  auto path = segments(target.substr(0, q));
  auto query = q == std::string_view::npos ? std::string_view{} : target.substr(q + 1);
  std::vector<std::string_view> allowed; // the methods of the patterns that fit the path
  for (auto& r : routes_) {
    if (r.method != method) {
      if (fits(r.pattern, path, nullptr) &&
          std::find(allowed.begin(), allowed.end(), r.method) == allowed.end())
        allowed.push_back(r.method);
      continue;
    }
    route_match found;
    if (!fits(r.pattern, path, &found.params.path_)) continue;
    found.kind = route_match::outcome::found;
    found.target = &r;
    for (auto& name : r.query_numbers) {
      auto n = query_number(query, name);
      if (!n) return n.error();
      found.params.numbers_.emplace_back(name, *n);
    }
    for (auto& name : r.query_texts) {
      auto t = query_text(query, name);
      if (!t) return t.error();
      if (*t) found.params.texts_.emplace_back(name, std::move(**t));
    }
    return found;
  }
  route_match m;
  for (auto method_name : allowed) {
    m.kind = route_match::outcome::method_not_allowed;
    if (!m.allow.empty()) m.allow += ", ";
    m.allow += method_name;
  }
  return m;
}

std::string_view label(endpoint ep) noexcept {
  switch (ep) {
  case endpoint::start_run:
    return "start_run";
  case endpoint::run_events:
    return "run_events";
  case endpoint::cancel_run:
    return "cancel_run";
  case endpoint::sandbox_run:
    return "sandbox_run";
  case endpoint::component_run:
    return "component_run";
  case endpoint::capabilities:
    return "capabilities";
  case endpoint::sessions:
    return "sessions";
  case endpoint::ports:
    return "ports";
  case endpoint::healthz:
    return "healthz";
  case endpoint::metrics:
    return "metrics";
  }
  return "unknown";
}

} // namespace guestflow::bridge
