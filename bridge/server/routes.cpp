#include "bridge/server/routes.hpp"

#include <charconv>

namespace guestflow::bridge {

namespace {

constexpr std::string_view runs_prefix = "/v1/runs/";

/// Run ids are the coordinator's own ([0-9a-z-]); anything else names no run.
bool plausible_id(std::string_view id) {
  if (id.empty() || id.size() > 64) return false;
  for (char c : id)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
          c == '-' || c == '_'))
      return false;
  return true;
}

route found(endpoint ep, std::string id = {}) {
  route r;
  r.ep = ep;
  r.run_id = std::move(id);
  return r;
}

route not_allowed(std::string allow) {
  route r;
  r.kind = route::outcome::method_not_allowed;
  r.allow = std::move(allow);
  return r;
}

/// `from_seq=N` (other parameters are ignored, as HTTP APIs do).
result<uint64_t> from_seq_of(std::string_view query) {
  while (!query.empty()) {
    auto amp = query.find('&');
    auto param = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    constexpr std::string_view key = "from_seq=";
    if (param.compare(0, key.size(), key) != 0) continue;
    auto digits = param.substr(key.size());
    uint64_t n = 0;
    auto [end, err] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
    if (digits.empty() || err != std::errc{} || end != digits.data() + digits.size())
      return fail(ec::bad_request, "from_seq: expected a non-negative integer, got '" +
                                       std::string{digits} + "'");
    return n;
  }
  return uint64_t{0};
}

} // namespace

result<route> match_route(std::string_view method, std::string_view target) {
  auto q = target.find('?');
  auto path = target.substr(0, q);
  auto query = q == std::string_view::npos ? std::string_view{} : target.substr(q + 1);
  auto only = [&](std::string_view m, endpoint ep, std::string id = {}) {
    return method == m ? found(ep, std::move(id)) : not_allowed(std::string{m});
  };
  if (path == "/v1/runs") return only("POST", endpoint::start_run);
  if (path == "/v1/sandbox/run") return only("POST", endpoint::sandbox_run);
  if (path == "/v1/components/run") return only("POST", endpoint::component_run);
  if (path == "/v1/capabilities") return only("GET", endpoint::capabilities);
  if (path == "/healthz") return only("GET", endpoint::healthz);
  if (path == "/metrics") return only("GET", endpoint::metrics);
  if (path.compare(0, runs_prefix.size(), runs_prefix) == 0) {
    auto rest = path.substr(runs_prefix.size());
    constexpr std::string_view events = "/events";
    if (rest.size() > events.size() &&
        rest.compare(rest.size() - events.size(), events.size(), events) == 0) {
      auto id = rest.substr(0, rest.size() - events.size());
      if (plausible_id(id)) {
        auto r = only("GET", endpoint::run_events, std::string{id});
        if (r.kind == route::outcome::found) {
          auto from = from_seq_of(query);
          if (!from) return from.error();
          r.from_seq = *from;
        }
        return r;
      }
    } else if (plausible_id(rest)) {
      return only("DELETE", endpoint::cancel_run, std::string{rest});
    }
  }
  route r;
  r.kind = route::outcome::not_found;
  return r;
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
  case endpoint::healthz:
    return "healthz";
  case endpoint::metrics:
    return "metrics";
  }
  return "unknown";
}

} // namespace guestflow::bridge
