#include "controlplane/local/http/routes.hpp"

#include "common/numbers.hpp"
#include "controlplane/local/http/metrics.hpp"
#include "messages/json.hpp"

#include <cerrno>
#include <cstring>
#include <memory>
#include <sys/stat.h>

namespace guestflow::local {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

result<uint64_t> parse_count(const std::map<std::string, std::string>& q, const char* key,
                             uint64_t fallback, uint64_t max) {
  auto i = q.find(key);
  if (i == q.end()) return fallback;
  auto v = parse_uint(i->second, 0, max);
  if (!v)
    return fail(ec::bad_request, std::string{key} + ": expected an integer from 0 to " +
                                     std::to_string(max) + ", got '" + i->second + "'");
  return *v;
}

// ---- handlers --------------------------------------------------------------------------

decode_limits json_limits(const handler_request& r) {
  decode_limits limits;
  limits.max_bytes = r.options.max_json_bytes;
  return limits;
}

/// A domain call whose result is answered with its JSend-wrapped encoding.
template<class Work>
domain_call answer(Work work) {
  return {[work = std::move(work)]() -> reply {
    auto r = work();
    if (!r) return failure_reply(r.error());
    return success_reply(encode(*r));
  }};
}

/// A handler whose request is a JSON body of type `Body`, refused with 400 when it does not
/// decode; `call(service, id, body)` is the domain call.
template<class Body, class Call>
handler with_json(Call call) {
  return {body_mode::whole, [call](const handler_request& r) -> action {
            auto body = decode<Body>(r.body, json_limits(r));
            if (!body) return failure_reply(body.error());
            return answer([&svc = r.service, id = r.id, body = std::move(*body), call] {
              return call(svc, id, body);
            });
          }};
}

/// POST /v1/sandboxes: the guest's id reaches its caller in the answer alone, so a caller
/// gone before the answer (a runtime SIGKILLed mid-create, a client past its deadline) gets
/// the guest deleted again (domain_call::undo): a create finishing after the restarted
/// runtime's start-up sweep listed would otherwise leave a guest nobody knows of.
action create_sandbox(const handler_request& r) {
  auto body = decode<sandbox_create_request>(r.body, json_limits(r));
  if (!body) return failure_reply(body.error());
  auto made = std::make_shared<std::string>(); // the id, once created
  domain_call call = answer([&svc = r.service, body = std::move(*body), made] {
    auto c = svc.create(body);
    if (c) *made = c->id;
    return c;
  });
  call.undo = [&svc = r.service, made] {
    if (!made->empty()) svc.destroy(*made);
  };
  return call;
}

/// A handler of a domain call on the route's {id} alone.
template<class Call>
handler on_id(Call call) {
  return {body_mode::whole, [call](const handler_request& r) -> action {
            return answer([&svc = r.service, id = r.id, call] { return call(svc, id); });
          }};
}

std::optional<std::string> file_path(const handler_request& r) {
  auto i = r.query.find("path");
  if (i == r.query.end() || i->second.empty()) return std::nullopt;
  return i->second;
}

reply missing_path() {
  return failure_reply(400, "path: the query parameter ?path=/absolute/path/in/guest is "
                            "required");
}

action get_file(const handler_request& r) {
  auto path = file_path(r);
  if (!path) return missing_path();
  return file_download{[&svc = r.service, id = r.id, path = *path]() -> result<opened_file> {
    auto f = svc.open_file(id, path, false);
    if (!f) return f.error();
    struct stat st {};
    if (::fstat(f->fd.get(), &st) != 0)
      return fail(ec::unavailable, std::string{"stat failed: "} + std::strerror(errno));
    if (!S_ISREG(st.st_mode))
      return fail(ec::bad_request, "path: " + path + " is not a regular file");
    return opened_file{std::move(*f), static_cast<uint64_t>(st.st_size)};
  }};
}

action put_file(const handler_request& r) {
  auto path = file_path(r);
  if (!path) return missing_path();
  return file_upload{
      [&svc = r.service, id = r.id, path = *path] { return svc.open_file(id, path, true); },
      *path,
      [&svc = r.service, id = r.id, path = *path](uint64_t bytes) {
        return svc.open_file_with_room(id, path, bytes);
      }};
}

action exec(const handler_request& r) {
  auto req = decode<exec_request>(r.body, json_limits(r));
  if (!req) return failure_reply(req.error());
  auto streaming = parse_stream_flag(r.query);
  if (!streaming) return failure_reply(streaming.error());
  return exec_call{
      [&svc = r.service, id = r.id, req = std::move(*req)] { return svc.start_exec(id, req); },
      *streaming};
}

/// `GET /v1/pool`'s data: `{"pools":[{shape, image, egress, target, ready, creating, floor,
/// cap, preload, takes, misses, evicted, fills, fill_ms, isolation}…]}`.
std::string encode_pool(const std::vector<pool_status>& pools) {
  std::string out = R"({"pools":[)";
  for (size_t i = 0; i < pools.size(); ++i) {
    const auto& p = pools[i];
    std::string egress;
    for (const auto& r : to_strings(p.key.egress))
      egress += (egress.empty() ? "" : ",") + quote_json(r);
    auto n = [](const char* k, uint64_t v) {
      return std::string{",\""} + k + "\":" + std::to_string(v);
    };
    out += std::string{i ? "," : ""} + R"({"shape":)" + quote_json(p.key.shape) +
           R"(,"image":)" + quote_json(p.key.image) + R"(,"egress":[)" + egress + "]" +
           n("target", p.target) + n("ready", p.ready) + n("creating", p.creating) +
           n("floor", p.floor) + n("cap", p.cap) + R"(,"preload":)" +
           quote_json(p.key.preload) + n("takes", p.takes) + n("misses", p.misses) +
           n("evicted", p.evicted) + n("fills", p.fills) + n("fill_ms", p.fill_ms) +
           R"(,"isolation":)" + quote_json(to_string(p.key.isolation)) + "}";
  }
  return out + "]}";
}

route_table make_wire_api_routes() {
  using svc = sandbox_service;
  route_table t;
  auto plain = [](auto work) {
    return handler{body_mode::whole, [work](const handler_request& r) -> action {
                     return answer([&s = r.service, work] { return work(s); });
                   }};
  };
  t.add("GET", "/v1/shapes", endpoint::shapes,
        plain([](svc& s) { return result<shape_list>{s.shapes()}; }));
  t.add("GET", "/v1/capabilities", endpoint::capabilities,
        plain([](svc& s) { return result<capabilities>{s.caps()}; }));
  t.add("GET", "/v1/whoami", endpoint::whoami,
        plain([](svc& s) { return result<whoami>{s.who()}; }));
  t.add("GET", "/v1/sandboxes", endpoint::list_sandboxes,
        {body_mode::whole, [](const handler_request& r) -> action {
           auto q = parse_list_query(r.query);
           if (!q) return failure_reply(q.error());
           return answer([&s = r.service, q = *q] { return s.list(q); });
         }});
  t.add("POST", "/v1/sandboxes", endpoint::create_sandbox, {body_mode::whole, create_sandbox});
  t.add("GET", "/v1/sandboxes/{id}", endpoint::get_sandbox,
        on_id([](svc& s, const std::string& id) { return s.view(id); }));
  t.add("DELETE", "/v1/sandboxes/{id}", endpoint::delete_sandbox,
        {body_mode::whole, [](const handler_request& r) -> action {
           // ?if_idle_for=S: refused while the guest is in use (the reaper's delete).
           if (!r.query.count("if_idle_for"))
             return answer([&s = r.service, id = r.id] { return s.destroy(id); });
           auto idle = parse_count(r.query, "if_idle_for", 0, UINT32_MAX);
           if (!idle) return failure_reply(idle.error());
           return answer([&s = r.service, id = r.id, n = static_cast<uint32_t>(*idle)] {
             return s.destroy_if_idle(id, n);
           });
         }});
  t.add("POST", "/v1/sandboxes/{id}/exec", endpoint::exec, {body_mode::whole, exec});
  t.add("GET", "/v1/sandboxes/{id}/files", endpoint::get_file, {body_mode::whole, get_file});
  t.add("PUT", "/v1/sandboxes/{id}/files", endpoint::put_file, {body_mode::streamed, put_file});
  t.add("GET", "/v1/sandboxes/{id}/egress", endpoint::get_egress,
        on_id([](svc& s, const std::string& id) { return s.egress(id); }));
  t.add("PUT", "/v1/sandboxes/{id}/egress", endpoint::put_egress,
        with_json<egress_body>([](svc& s, const std::string& id, const egress_body& b) {
          return s.set_egress(id, b.egress);
        }));
  t.add("POST", "/v1/sandboxes/{id}/pause", endpoint::pause,
        on_id([](svc& s, const std::string& id) { return s.pause(id); }));
  t.add("POST", "/v1/sandboxes/{id}/resume", endpoint::resume,
        on_id([](svc& s, const std::string& id) { return s.resume(id); }));
  t.add("POST", "/v1/sandboxes/{id}/stop", endpoint::stop_sandbox,
        on_id([](svc& s, const std::string& id) { return s.stop(id); }));
  t.add("POST", "/v1/sandboxes/{id}/start", endpoint::start_sandbox,
        on_id([](svc& s, const std::string& id) { return s.start(id); }));
  t.add("GET", "/v1/images", endpoint::list_images, plain([](svc& s) { return s.images(); }));
  t.add(
      "POST", "/v1/images", endpoint::add_image,
      with_json<image_add_request>([](svc& s, const std::string&, const image_add_request& b) {
        return s.add_image(b);
      }));
  t.add("DELETE", "/v1/images/{id}", endpoint::delete_image,
        on_id([](svc& s, const std::string& id) { return s.remove_image(id); }));
  t.add("GET", "/v1/pool", endpoint::warm_pool,
        {body_mode::whole, [](const handler_request& r) -> action {
           return domain_call{
               [&s = r.service] { return success_reply(encode_pool(s.pool())); }};
         }});
  auto capacity_answer = [](auto work) {
    return handler{body_mode::whole, [work](const handler_request& r) -> action {
                     return domain_call{[&s = r.service, work]() -> reply {
                       auto c = work(s);
                       if (!c) return failure_reply(c.error());
                       return success_reply(encode_capacity(*c));
                     }};
                   }};
  };
  t.add("GET", "/v1/capacity", endpoint::capacity,
        capacity_answer([](svc& s) { return s.capacity(); }));
  // GET /metrics: the two answers above in Prometheus's text format (metrics.hpp), where a
  // scraper looks by default.
  t.add("GET", "/metrics", endpoint::metrics,
        {body_mode::whole, [](const handler_request& r) -> action {
           return domain_call{[&s = r.service]() -> reply {
             auto c = s.capacity();
             if (!c) return failure_reply(c.error());
             return reply{200, encode_metrics(*c, s.pool()),
                          "text/plain; version=0.0.4; charset=utf-8"};
           }};
         }});
  t.add("POST", "/v1/drain", endpoint::start_drain,
        capacity_answer([](svc& s) { return s.drain(true); }));
  t.add("DELETE", "/v1/drain", endpoint::stop_drain,
        capacity_answer([](svc& s) { return s.drain(false); }));
  return t;
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

result<list_query> parse_list_query(const std::map<std::string, std::string>& query) {
  list_query q;
  if (auto i = query.find("status"); i != query.end() && !i->second.empty()) {
    auto s = sandbox_status_from_string(i->second);
    if (!s)
      return fail(ec::bad_request, "status: unknown status '" + i->second +
                                       "'; use creating, running, pausing, paused, resuming, "
                                       "error, destroying, destroyed, failed, stopping, "
                                       "stopped or starting");
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

const route_table& wire_api_routes() {
  static const route_table table = make_wire_api_routes();
  return table;
}

route match_route(std::string_view method, std::string_view path) {
  return wire_api_routes().match(method, path);
}

result<bool> parse_stream_flag(const std::map<std::string, std::string>& query) {
  auto i = query.find("stream");
  if (i == query.end() || i->second == "false" || i->second == "0") return false;
  if (i->second == "true" || i->second == "1" || i->second.empty()) return true;
  return fail(ec::bad_request, "stream: expected true or false, got '" + i->second + "'");
}

} // namespace guestflow::local
