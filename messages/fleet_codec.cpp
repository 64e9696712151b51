#include "common/numbers.hpp"
#include "messages/base64.hpp"
#include "messages/fleet.hpp"
#include "messages/json_codec.hpp"

#include <array>
#include <limits>

namespace guestflow {
namespace {

constexpr int64_t int64_max = std::numeric_limits<int64_t>::max();

/// etcd's gateway writes int64 fields as decimal strings (and accepts numbers): either is
/// read; absent or null is 0.
int64_t gateway_int(const object_view& o, std::string_view key) {
  auto v = o.find(key);
  if (v == nullptr) return 0;
  if (v->IsString()) {
    auto text = codec::as_string(*v, o.at(key));
    auto n = parse_uint(text, 0, static_cast<uint64_t>(int64_max));
    if (!n) codec::raise(o.at(key), "expected a decimal integer, got " + quote_json(text));
    return static_cast<int64_t>(*n);
  }
  return codec::as_int(*v, o.at(key), std::numeric_limits<int64_t>::min(), int64_max);
}

std::string bytes_field(const object_view& o, std::string_view key) {
  auto text = o.str_or(key, "");
  auto bytes = base64_decode(text);
  if (!bytes) codec::raise(o.at(key), bytes.error().message);
  return std::move(bytes).value();
}

etcd::key_value key_value_of(const value& v, const path& p) {
  object_view o{v, p};
  etcd::key_value kv;
  kv.key = bytes_field(o, "key");
  kv.value = bytes_field(o, "value");
  kv.create_revision = gateway_int(o, "create_revision");
  kv.mod_revision = gateway_int(o, "mod_revision");
  kv.lease = gateway_int(o, "lease");
  return kv;
}

void read_kvs(const object_view& o, std::vector<etcd::key_value>& into) {
  auto kvs = o.find("kvs");
  if (kvs == nullptr) return;
  auto at = o.at("kvs");
  codec::expect_array(*kvs, at);
  size_t i = 0;
  for (auto& kv : kvs->GetArray())
    into.push_back(key_value_of(kv, at.at(i++)));
}

int64_t header_revision(const object_view& o) {
  auto h = o.find("header");
  if (h == nullptr) return 0;
  return gateway_int(object_view{*h, o.at("header")}, "revision");
}

/// The reply fields every kv answer may carry, into `r` (a txn's responses recurse here).
void read_kv_reply(const object_view& o, etcd::kv_reply& r) {
  read_kvs(o, r.kvs);
  r.deleted += gateway_int(o, "deleted");
}

void write_bytes(json_writer& w, std::string_view key, std::string_view bytes) {
  w.field(key, base64_encode(bytes));
}

void write_id(json_writer& w, std::string_view key, int64_t id) {
  w.field(key, std::to_string(id));
}

} // namespace

// -- node_capacity, name_claim ------------------------------------------------------------

template<>
result<node_capacity> decode<node_capacity>(std::string_view text,
                                            const decode_limits& limits) {
  return codec::decode_with<node_capacity>(text, limits, [](const value& v, const path& p) {
    object_view o{v, p};
    node_capacity x;
    x.node = o.str("node");
    x.memory_budget_mib = o.uint("memory_budget_mib");
    x.memory_committed_mib = o.uint("memory_committed_mib");
    x.guests = o.uint_or("guests", 0);
    x.max_guests = o.uint_or("max_guests", 0);
    x.draining = o.boolean_or("draining", false);
    x.ready = o.boolean_or("ready", false);
    x.url = o.str_or("url", "");
    return result<node_capacity>{std::move(x)};
  });
}

std::string encode(const node_capacity& x) {
  json_writer w;
  w.begin_object()
      .field("node", x.node)
      .field("memory_budget_mib", x.memory_budget_mib)
      .field("memory_committed_mib", x.memory_committed_mib)
      .field("guests", x.guests)
      .field("max_guests", x.max_guests)
      .field("draining", x.draining)
      .field("ready", x.ready);
  if (!x.url.empty()) w.field("url", x.url);
  return w.end_object().take();
}

template<>
result<name_claim> decode<name_claim>(std::string_view text, const decode_limits& limits) {
  return codec::decode_with<name_claim>(text, limits, [](const value& v, const path& p) {
    object_view o{v, p};
    name_claim x;
    x.node = o.str("node");
    x.owner = o.str_or("owner", "");
    return result<name_claim>{std::move(x)};
  });
}

std::string encode(const name_claim& x) {
  json_writer w;
  return w.begin_object().field("node", x.node).field("owner", x.owner).end_object().take();
}

// -- etcd gateway -----------------------------------------------------------------------

namespace etcd {

std::string prefix_end(std::string_view prefix) {
  std::string end{prefix};
  while (!end.empty()) {
    auto& last = reinterpret_cast<unsigned char&>(end.back());
    if (last < 0xff) {
      ++last;
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');
}

std::string range_body(std::string_view key, std::string_view range_end) {
  json_writer w;
  w.begin_object();
  write_bytes(w, "key", key);
  if (!range_end.empty()) write_bytes(w, "range_end", range_end);
  return w.end_object().take();
}

std::string put_body(std::string_view key, std::string_view value, int64_t lease) {
  json_writer w;
  w.begin_object();
  write_bytes(w, "key", key);
  write_bytes(w, "value", value);
  if (lease != 0) write_id(w, "lease", lease);
  return w.end_object().take();
}

std::string delete_body(std::string_view key, std::string_view range_end) {
  return range_body(key, range_end);
}

std::string create_if_absent_body(std::string_view key, std::string_view value, int64_t lease) {
  json_writer w;
  w.begin_object().key("compare").begin_array().begin_object();
  write_bytes(w, "key", key);
  w.field("target", "CREATE").field("result", "EQUAL").field("create_revision", "0");
  w.end_object().end_array();
  w.key("success").begin_array().begin_object().key("request_put").begin_object();
  write_bytes(w, "key", key);
  write_bytes(w, "value", value);
  if (lease != 0) write_id(w, "lease", lease);
  w.end_object().end_object().end_array();
  w.key("failure").begin_array().begin_object().key("request_range").begin_object();
  write_bytes(w, "key", key);
  w.end_object().end_object().end_array();
  return w.end_object().take();
}

std::string delete_if_value_body(std::string_view key, std::string_view value) {
  json_writer w;
  w.begin_object().key("compare").begin_array().begin_object();
  write_bytes(w, "key", key);
  w.field("target", "VALUE").field("result", "EQUAL");
  write_bytes(w, "value", value);
  w.end_object().end_array();
  w.key("success").begin_array().begin_object().key("request_delete_range").begin_object();
  write_bytes(w, "key", key);
  w.end_object().end_object().end_array();
  return w.end_object().take();
}

std::string lease_grant_body(int64_t ttl_seconds) {
  json_writer w;
  w.begin_object();
  write_id(w, "TTL", ttl_seconds);
  return w.end_object().take();
}

std::string lease_id_body(int64_t id) {
  json_writer w;
  w.begin_object();
  write_id(w, "ID", id);
  return w.end_object().take();
}

result<kv_reply> decode_kv_reply(std::string_view text) {
  return codec::decode_with<kv_reply>(text, {}, [](const value& v, const path& p) {
    object_view o{v, p};
    kv_reply r;
    r.revision = header_revision(o);
    r.succeeded = o.boolean_or("succeeded", false);
    read_kv_reply(o, r);
    if (auto responses = o.find("responses")) {
      auto at = o.at("responses");
      codec::expect_array(*responses, at);
      size_t i = 0;
      for (auto& one : responses->GetArray()) {
        object_view op{one, at.at(i++)};
        for (auto name : {"response_range", "response_delete_range", "response_put"})
          if (auto inner = op.find(name)) read_kv_reply(object_view{*inner, op.at(name)}, r);
      }
    }
    return result<kv_reply>{std::move(r)};
  });
}

result<lease_reply> decode_lease_reply(std::string_view text) {
  return codec::decode_with<lease_reply>(text, {}, [](const value& v, const path& p) {
    object_view outer{v, p};
    auto inner = outer.find("result");
    object_view o = inner != nullptr ? object_view{*inner, outer.at("result")} : outer;
    lease_reply r;
    r.id = gateway_int(o, "ID");
    r.ttl = gateway_int(o, "TTL");
    return result<lease_reply>{r};
  });
}

gateway_error decode_gateway_error(std::string_view text) {
  auto decoded = codec::decode_with<gateway_error>(text, {}, [](const value& v, const path& p) {
    object_view outer{v, p};
    // A stream's error line nests it: {"error":{"grpc_code":5,"message":…}}.
    auto e = outer.find("error");
    if (e != nullptr && e->IsObject()) {
      object_view o{*e, outer.at("error")};
      gateway_error r;
      r.message = o.str_or("message", "");
      r.code = gateway_int(o, "grpc_code");
      if (r.code == 0) r.code = gateway_int(o, "code");
      return result<gateway_error>{std::move(r)};
    }
    gateway_error r;
    r.message = outer.str_or("message", "");
    if (r.message.empty() && e != nullptr && e->IsString())
      r.message = codec::as_string(*e, outer.at("error"));
    r.code = gateway_int(outer, "code");
    return result<gateway_error>{std::move(r)};
  });
  if (!decoded) return {};
  return std::move(decoded).value();
}

} // namespace etcd
} // namespace guestflow
