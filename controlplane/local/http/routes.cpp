#include "controlplane/local/http/routes.hpp"

#include <charconv>
#include <vector>

namespace guestflow::local {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::vector<std::string_view> split_path(std::string_view path) {
  std::vector<std::string_view> out;
  size_t i = 1; // path starts with '/'
  while (i <= path.size()) {
    auto j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    out.push_back(path.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

/// Table row: a path pattern ("{}" = id) and the endpoint per method.
struct pattern {
  std::vector<std::string_view> segments;
  std::vector<std::pair<std::string_view, endpoint>> methods;
};

const std::vector<pattern>& patterns() {
  static const std::vector<pattern> table = {
      {{"v1", "shapes"}, {{"GET", endpoint::shapes}}},
      {{"v1", "capabilities"}, {{"GET", endpoint::capabilities}}},
      {{"v1", "whoami"}, {{"GET", endpoint::whoami}}},
      {{"v1", "sandboxes"},
       {{"GET", endpoint::list_sandboxes}, {"POST", endpoint::create_sandbox}}},
      {{"v1", "sandboxes", "{}"},
       {{"GET", endpoint::get_sandbox}, {"DELETE", endpoint::delete_sandbox}}},
      {{"v1", "sandboxes", "{}", "exec"}, {{"POST", endpoint::exec}}},
      {{"v1", "sandboxes", "{}", "files"},
       {{"GET", endpoint::get_file}, {"PUT", endpoint::put_file}}},
      {{"v1", "sandboxes", "{}", "egress"},
       {{"GET", endpoint::get_egress}, {"PUT", endpoint::put_egress}}},
      {{"v1", "sandboxes", "{}", "pause"}, {{"POST", endpoint::pause}}},
      {{"v1", "sandboxes", "{}", "resume"}, {{"POST", endpoint::resume}}},
      {{"v1", "images"}, {{"GET", endpoint::list_images}, {"POST", endpoint::add_image}}},
      {{"v1", "images", "{}"}, {{"DELETE", endpoint::delete_image}}},
  };
  return table;
}

result<uint64_t> parse_count(const std::map<std::string, std::string>& q, const char* key,
                             uint64_t fallback, uint64_t max) {
  auto i = q.find(key);
  if (i == q.end()) return fallback;
  uint64_t v = 0;
  const auto& s = i->second;
  auto [p, err] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (err != std::errc{} || p != s.data() + s.size() || v > max)
    return fail(ec::bad_request, std::string{key} + ": expected an integer from 0 to " +
                                     std::to_string(max) + ", got '" + s + "'");
  return v;
}

} // namespace

result<std::string> url_decode(std::string_view s, bool query) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '%') {
      int hi = i + 2 < s.size() ? hex_value(s[i + 1]) : -1;
      int lo = i + 2 < s.size() ? hex_value(s[i + 2]) : -1;
      if (hi < 0 || lo < 0)
        return fail(ec::bad_request, "malformed percent-escape in '" + std::string{s} + "'");
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (c == '+' && query) {
      out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
  return out;
}

result<request_target> parse_target(std::string_view target) {
  request_target out;
  auto q = target.find('?');
  auto path = url_decode(target.substr(0, q), false);
  if (!path) return path.error();
  out.path = std::move(*path);
  if (out.path.empty() || out.path.front() != '/')
    return fail(ec::bad_request, "request target must be an absolute path");
  if (q == std::string_view::npos) return out;
  auto rest = target.substr(q + 1);
  while (!rest.empty()) {
    auto amp = rest.find('&');
    auto part = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view{} : rest.substr(amp + 1);
    if (part.empty()) continue;
    auto eq = part.find('=');
    auto key = url_decode(part.substr(0, eq), true);
    auto value = url_decode(
        eq == std::string_view::npos ? std::string_view{} : part.substr(eq + 1), true);
    if (!key) return key.error();
    if (!value) return value.error();
    out.query[*key] = std::move(*value);
  }
  return out;
}

route match_route(std::string_view method, std::string_view path) {
  auto segs = split_path(path);
  if (!segs.empty() && segs.back().empty()) segs.pop_back(); // tolerate one trailing slash
  for (const auto& p : patterns()) {
    if (p.segments.size() != segs.size()) continue;
    route r;
    bool same = true;
    for (size_t i = 0; i < segs.size() && same; ++i) {
      if (p.segments[i] == "{}") {
        same = !segs[i].empty();
        r.id = std::string{segs[i]};
      } else {
        same = p.segments[i] == segs[i];
      }
    }
    if (!same) continue;
    for (const auto& [m, ep] : p.methods) {
      if (!r.allow.empty()) r.allow += ", ";
      r.allow += m;
      if (m == method) {
        r.kind = route::outcome::found;
        r.ep = ep;
        return r;
      }
    }
    r.kind = route::outcome::method_not_allowed;
    return r;
  }
  return {};
}

bool takes_json_body(endpoint ep) {
  return ep == endpoint::create_sandbox || ep == endpoint::exec || ep == endpoint::put_egress ||
         ep == endpoint::add_image;
}

result<list_query> parse_list_query(const std::map<std::string, std::string>& query) {
  list_query q;
  if (auto i = query.find("status"); i != query.end() && !i->second.empty()) {
    auto s = sandbox_status_from_string(i->second);
    if (!s)
      return fail(ec::bad_request, "status: unknown status '" + i->second +
                                       "'; use creating, running, pausing, paused, resuming, "
                                       "error, destroying, destroyed or failed");
    q.status = *s;
  }
  auto limit = parse_count(query, "limit", q.limit, 1000);
  if (!limit) return limit.error();
  auto offset = parse_count(query, "offset", 0, UINT32_MAX);
  if (!offset) return offset.error();
  q.limit = *limit;
  q.offset = *offset;
  return q;
}

result<bool> parse_stream_flag(const std::map<std::string, std::string>& query) {
  auto i = query.find("stream");
  if (i == query.end() || i->second == "false" || i->second == "0") return false;
  if (i->second == "true" || i->second == "1" || i->second.empty()) return true;
  return fail(ec::bad_request, "stream: expected true or false, got '" + i->second + "'");
}

} // namespace guestflow::local
