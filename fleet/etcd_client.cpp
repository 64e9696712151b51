#include "fleet/etcd_client.hpp"

#include "common/numbers.hpp"
#include "common/text.hpp"

#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace guestflow::fleet {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using clock = std::chrono::steady_clock;

constexpr std::string_view scheme = "etcd://";
/// etcd's answers are small (a range over the fleet's keys is the largest); more is not etcd.
constexpr size_t max_body_bytes = size_t{16} << 20;

/// How one attempt against one endpoint ended.
enum class attempt_kind : uint8_t {
  answered,    ///< an HTTP answer (any status)
  unreachable, ///< resolve or connect failed: nothing was sent
  broken,      ///< sent, but the connection broke or the share of the deadline ran out
};

struct attempt {
  attempt_kind kind = attempt_kind::answered;
  unsigned status = 0;
  std::string body;
  std::string why; ///< for unreachable / broken
};

/// One POST on a fresh connection, all of it (resolve, connect, write, read) before
/// `deadline`. Runs its own io_context on the calling thread: blocking, no shared state.
attempt post_once(const etcd_endpoint& ep, std::string_view target, const std::string& body,
                  clock::time_point deadline) {
  asio::io_context ioc;
  tcp::resolver resolver{ioc};
  beast::tcp_stream stream{ioc};
  http::request<http::string_body> req{http::verb::post, std::string{target}, 11};
  req.set(http::field::host, ep.host + ":" + std::to_string(ep.port));
  req.set(http::field::content_type, "application/json");
  req.body() = body;
  req.prepare_payload();
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(max_body_bytes);

  attempt out;
  bool sent = false;
  auto finish = [&](beast::error_code ec, std::string_view stage) {
    out.kind = sent ? attempt_kind::broken : attempt_kind::unreachable;
    out.why = std::string{stage} + ": " +
              (ec == beast::error::timeout ? std::string{"timed out"} : ec.message());
  };
  asio::steady_timer resolve_timer{ioc};
  resolve_timer.expires_at(deadline);
  resolve_timer.async_wait([&](beast::error_code ec) {
    if (!ec) resolver.cancel();
  });
  resolver.async_resolve(
      ep.host, std::to_string(ep.port),
      [&](beast::error_code ec, const tcp::resolver::results_type& found) {
        resolve_timer.cancel();
        if (ec)
          return finish(ec == asio::error::operation_aborted ? beast::error::timeout : ec,
                        "resolve");
        stream.expires_at(deadline);
        stream.async_connect(found, [&](beast::error_code ec, const tcp::endpoint&) {
          if (ec) return finish(ec, "connect");
          sent = true;
          http::async_write(stream, req, [&](beast::error_code ec, size_t) {
            if (ec) return finish(ec, "write");
            http::async_read(stream, buffer, parser, [&](beast::error_code ec, size_t) {
              if (ec) return finish(ec, "read");
              out.kind = attempt_kind::answered;
              out.status = parser.get().result_int();
              out.body = std::move(parser.get().body());
            });
          });
        });
      });
  ioc.run();
  beast::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  return out;
}

failure answer_failure(const attempt& a, std::string_view what) {
  auto err = etcd::decode_gateway_error(a.body);
  std::string msg = "etcd " + std::string{what} + ": ";
  msg += err.message.empty() ? "HTTP " + std::to_string(a.status) : err.message;
  switch (err.code) {
  case 5:
    return fail(ec::not_found, std::move(msg));
  case 3:  // invalid argument
  case 9:  // failed precondition
  case 11: // out of range
    return fail(ec::bad_request, std::move(msg));
  default:
    return fail(ec::unavailable, std::move(msg));
  }
}

/// True when another endpoint may do better than this answer: etcd without a leader, or a
/// gateway that lost its backend.
bool worth_another_endpoint(const attempt& a) {
  if (a.status == 503) return true;
  return etcd::decode_gateway_error(a.body).code == 14;
}

std::string first_line(std::string_view body) {
  auto lines = split(body, "\n");
  for (auto& l : lines)
    if (!trim(l).empty()) return std::string{trim(l)};
  return {};
}

} // namespace

struct etcd_client::impl {
  std::vector<etcd_endpoint> endpoints;
  millis default_timeout;
  std::atomic<size_t> preferred{0}; ///< the endpoint that answered last

  std::string url() const {
    std::string u{scheme};
    for (size_t i = 0; i < endpoints.size(); ++i) {
      if (i > 0) u += ',';
      u += endpoints[i].host + ":" + std::to_string(endpoints[i].port);
    }
    return u;
  }

  /// POSTs `body` to `target`, failing over across endpoints within one deadline; the
  /// 200 answer's body.
  result<std::string> call(std::string_view target, const std::string& body, millis timeout,
                           std::string_view what) {
    if (timeout <= millis::zero()) timeout = default_timeout;
    auto start = clock::now();
    auto deadline = start + timeout;
    std::string tried;
    bool any_broken = false;
    auto n = endpoints.size();
    auto first = preferred.load() % n;
    for (size_t k = 0; k < n; ++k) {
      auto now = clock::now();
      if (now >= deadline) break;
      auto i = (first + k) % n;
      // Each endpoint left gets an equal share of what is left, so one that hangs cannot
      // eat the time of those after it.
      auto share = (deadline - now) / static_cast<long>(n - k);
      auto a = post_once(endpoints[i], target, body, now + share);
      auto where = endpoints[i].host + ":" + std::to_string(endpoints[i].port);
      if (a.kind == attempt_kind::answered) {
        if (a.status == 200) {
          preferred.store(i);
          return std::move(a.body);
        }
        if (k + 1 < n && worth_another_endpoint(a)) {
          tried += (tried.empty() ? "" : "; ") + where + ": HTTP " + std::to_string(a.status);
          continue;
        }
        return answer_failure(a, what);
      }
      any_broken = any_broken || a.kind == attempt_kind::broken;
      tried += (tried.empty() ? "" : "; ") + where + " " + a.why;
    }
    auto spent = std::chrono::duration_cast<millis>(clock::now() - start).count();
    if (any_broken || clock::now() >= deadline)
      return fail(ec::transient, "etcd " + std::string{what} + " at " + url() +
                                     " timed out after " + std::to_string(spent) + " ms (" +
                                     tried + ")");
    return fail(ec::unavailable, "etcd at " + url() + " unreachable: " + tried);
  }
};

result<std::vector<etcd_endpoint>> parse_etcd_url(std::string_view url) {
  auto text = trim(url);
  auto refuse = [&](std::string why) -> failure {
    return fail(ec::bad_request, "etcd URL " + quote_json(text) + ": " + why +
                                     " (expected etcd://HOST:PORT[,HOST:PORT…])");
  };
  if (text.substr(0, scheme.size()) != scheme) return refuse("must start with etcd://");
  text.remove_prefix(scheme.size());
  std::vector<etcd_endpoint> out;
  // By hand rather than split(): an empty item ("h:1,,h:2") is a mistake to name.
  std::vector<std::string_view> items;
  for (size_t from = 0;;) {
    auto comma = text.find(',', from);
    items.push_back(text.substr(from, comma == std::string_view::npos ? comma : comma - from));
    if (comma == std::string_view::npos) break;
    from = comma + 1;
  }
  for (auto item : items) {
    auto one = trim(item);
    if (one.empty()) return refuse("empty endpoint");
    etcd_endpoint ep;
    std::string_view port_text;
    if (one.front() == '[') {
      auto close = one.find(']');
      if (close == std::string_view::npos || close + 1 >= one.size() || one[close + 1] != ':')
        return refuse("bad IPv6 endpoint " + quote_json(one));
      ep.host = std::string{one.substr(1, close - 1)};
      port_text = one.substr(close + 2);
    } else {
      auto colon = one.rfind(':');
      if (colon == std::string_view::npos || colon == 0)
        return refuse("endpoint " + quote_json(one) + " needs HOST:PORT");
      ep.host = std::string{one.substr(0, colon)};
      if (ep.host.find_first_of(":/@?#") != std::string::npos)
        return refuse("bad host " + quote_json(ep.host));
      port_text = one.substr(colon + 1);
    }
    auto port = parse_uint_as<uint16_t>(port_text, 1, 65535);
    if (!port) return refuse(uint_refusal("port", port_text, 1, 65535));
    ep.port = *port;
    out.push_back(std::move(ep));
  }
  if (out.empty()) return refuse("no endpoint");
  return out;
}

result<std::shared_ptr<etcd_client>> etcd_client::make(std::string_view url,
                                                       millis default_timeout) {
  auto eps = parse_etcd_url(url);
  if (!eps) return eps.error();
  if (default_timeout <= millis::zero())
    return fail(ec::bad_request, "etcd client: the default timeout must be positive");
  auto p = std::make_unique<impl>();
  p->endpoints = std::move(eps).value();
  p->default_timeout = default_timeout;
  return std::shared_ptr<etcd_client>(new etcd_client(std::move(p)));
}

etcd_client::etcd_client(std::unique_ptr<impl> p)
    : impl_(std::move(p)) {}

etcd_client::~etcd_client() = default;

const std::vector<etcd_endpoint>& etcd_client::endpoints() const noexcept {
  return impl_->endpoints;
}

std::string etcd_client::url() const {
  return impl_->url();
}

result<etcd::lease_reply> etcd_client::lease_grant(int64_t ttl_seconds, millis timeout) {
  if (ttl_seconds <= 0) return fail(ec::bad_request, "etcd lease: TTL must be positive");
  auto body = impl_->call("/v3/lease/grant", etcd::lease_grant_body(ttl_seconds), timeout,
                          "lease grant");
  if (!body) return body.error();
  auto r = etcd::decode_lease_reply(*body);
  if (!r) return fail(ec::unavailable, "etcd lease grant: " + r.error().message);
  if (r->id == 0) return fail(ec::unavailable, "etcd lease grant: no lease ID in the answer");
  return r;
}

result<int64_t> etcd_client::lease_keepalive(int64_t lease_id, millis timeout) {
  auto body = impl_->call("/v3/lease/keepalive", etcd::lease_id_body(lease_id), timeout,
                          "lease keepalive");
  if (!body) return body.error();
  auto line = first_line(*body);
  auto err = etcd::decode_gateway_error(line);
  if (err.code != 0)
    return fail(err.code == 5 ? ec::not_found : ec::unavailable,
                "etcd lease keepalive: " + err.message);
  auto r = etcd::decode_lease_reply(line);
  if (!r) return fail(ec::unavailable, "etcd lease keepalive: " + r.error().message);
  // A lease that is gone answers with no TTL rather than an error.
  if (r->ttl <= 0)
    return fail(ec::not_found, "etcd lease keepalive: lease " + std::to_string(lease_id) +
                                   " has expired or was revoked");
  return r->ttl;
}

result<bool> etcd_client::lease_revoke(int64_t lease_id, millis timeout) {
  auto body =
      impl_->call("/v3/lease/revoke", etcd::lease_id_body(lease_id), timeout, "lease revoke");
  if (!body) return body.error();
  return true;
}

result<int64_t> etcd_client::put(std::string_view key, std::string_view value, int64_t lease,
                                 millis timeout) {
  auto body = impl_->call("/v3/kv/put", etcd::put_body(key, value, lease), timeout, "put");
  if (!body) return body.error();
  auto r = etcd::decode_kv_reply(*body);
  if (!r) return fail(ec::unavailable, "etcd put: " + r.error().message);
  return r->revision;
}

result<std::optional<etcd::key_value>> etcd_client::get(std::string_view key, millis timeout) {
  auto body = impl_->call("/v3/kv/range", etcd::range_body(key), timeout, "get");
  if (!body) return body.error();
  auto r = etcd::decode_kv_reply(*body);
  if (!r) return fail(ec::unavailable, "etcd get: " + r.error().message);
  if (r->kvs.empty()) return std::optional<etcd::key_value>{};
  return std::optional<etcd::key_value>{std::move(r->kvs.front())};
}

result<std::vector<etcd::key_value>> etcd_client::range(std::string_view prefix,
                                                        millis timeout) {
  auto body = impl_->call("/v3/kv/range", etcd::range_body(prefix, etcd::prefix_end(prefix)),
                          timeout, "range");
  if (!body) return body.error();
  auto r = etcd::decode_kv_reply(*body);
  if (!r) return fail(ec::unavailable, "etcd range: " + r.error().message);
  return std::move(r->kvs);
}

result<claim_outcome> etcd_client::create_if_absent(std::string_view key,
                                                    std::string_view value, int64_t lease,
                                                    millis timeout) {
  auto body = impl_->call("/v3/kv/txn", etcd::create_if_absent_body(key, value, lease), timeout,
                          "create-if-absent");
  if (!body) return body.error();
  auto r = etcd::decode_kv_reply(*body);
  if (!r) return fail(ec::unavailable, "etcd create-if-absent: " + r.error().message);
  claim_outcome out;
  if (r->succeeded) {
    out.created = true;
    out.current.key = std::string{key};
    out.current.value = std::string{value};
    out.current.create_revision = r->revision;
    out.current.mod_revision = r->revision;
    out.current.lease = lease;
    return out;
  }
  if (r->kvs.empty()) // deleted between the compare and the read: it was not ours to take
    return fail(ec::transient, "etcd create-if-absent: the key changed during the call");
  out.current = std::move(r->kvs.front());
  // A failed-over retry whose first attempt landed finds its own value.
  out.created = out.current.value == value;
  return out;
}

result<bool> etcd_client::erase(std::string_view key, millis timeout) {
  auto body = impl_->call("/v3/kv/deleterange", etcd::delete_body(key), timeout, "delete");
  if (!body) return body.error();
  auto r = etcd::decode_kv_reply(*body);
  if (!r) return fail(ec::unavailable, "etcd delete: " + r.error().message);
  return r->deleted > 0;
}

result<bool> etcd_client::erase_if_value(std::string_view key, std::string_view value,
                                         millis timeout) {
  auto body = impl_->call("/v3/kv/txn", etcd::delete_if_value_body(key, value), timeout,
                          "delete-if-value");
  if (!body) return body.error();
  auto r = etcd::decode_kv_reply(*body);
  if (!r) return fail(ec::unavailable, "etcd delete-if-value: " + r.error().message);
  return r->succeeded && r->deleted > 0;
}

} // namespace guestflow::fleet
